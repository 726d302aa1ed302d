package engine

import "github.com/cairnflow/cairn/engine/machine"

// The run state machine lives in engine/machine; these names stay here
// because Options and the engine's callers use them.

type (
	// Limits bound what one run may hold (machine.Limits).
	Limits = machine.Limits
	// Defaults are the values the engine uses when a request leaves a
	// timeout or policy unset (machine.Defaults).
	Defaults = machine.Defaults
	// Pricing maps a model name to its price (machine.Pricing).
	Pricing = machine.Pricing
	// Price is what a model's tokens cost (machine.Price).
	Price = machine.Price
)

// DefaultLimits returns the documented defaults (machine.DefaultLimits).
func DefaultLimits() Limits { return machine.DefaultLimits() }

// DefaultDefaults returns the documented defaults
// (machine.DefaultDefaults).
func DefaultDefaults() Defaults { return machine.DefaultDefaults() }

// IdempotencyKey derives an action's idempotency key: hash(workflow id,
// activity type, key material, occurrence) (machine.IdempotencyKey).
func IdempotencyKey(workflowID, activityType string, material []byte, occurrence int32) string {
	return machine.IdempotencyKey(workflowID, activityType, material, occurrence)
}
