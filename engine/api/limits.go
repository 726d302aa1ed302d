package api

// ActivityLimit bounds the activities of a task queue dispatched to workers:
// how many may be in flight at once (dispatched and not yet completed,
// failed or timed out) and how many may start per second. It applies to the
// activities of ActivityType ("": every type) whose LimitKey
// (history.ActivityOptions.LimitKey, a comma-separated list of keys such as
// "openai/gpt-4o,tenant/acme") holds LimitKey ("": any key). A LimitKey
// ending in "*" is a family: every key with that prefix is limited apart
// ("tenant/*" with MaxInFlight 4: at most 4 for each tenant).
//
// A limit is identified by (TaskQueue, ActivityType, LimitKey); an
// activity is dispatched only when every limit it falls under has room.
type ActivityLimit struct {
	TaskQueue    string
	ActivityType string
	LimitKey     string
	// MaxInFlight is the most activities in flight at once (0: no bound).
	MaxInFlight int
	// RatePerSecond is how many may be dispatched per second on average
	// (0: no bound), in bursts of up to Burst (0: the rate rounded up,
	// at least 1).
	RatePerSecond float64
	Burst         int
}

// MaxActivityLimitsPerQueue bounds the limits of one task queue.
const MaxActivityLimitsPerQueue = 256

// SetActivityLimitRequest sets (or, with Clear, removes) a limit.
type SetActivityLimitRequest struct {
	Limit ActivityLimit
	Clear bool
}

// SetActivityLimitResponse lists the task queue's limits after the change.
type SetActivityLimitResponse struct {
	Limits []ActivityLimit
}

// ActivityLimitInfo is a limit and how it is used right now (on this
// server: see docs/workers.md for a cluster).
type ActivityLimitInfo struct {
	Limit ActivityLimit
	// InFlight counts the activities holding a slot of the limit; Waiting
	// the queued ones that fall under it.
	InFlight int
	Waiting  int
	// Keys breaks a family limit ("tenant/*") down by key.
	Keys []LimitKeyInfo
}

// LimitKeyInfo is one key's use of a limit, or its backlog on a queue.
type LimitKeyInfo struct {
	Key      string
	InFlight int
	Waiting  int
}
