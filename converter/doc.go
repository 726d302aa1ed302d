// Package converter turns Go values into history payloads and back: the
// canonical MessagePack encoding workflows and activities use by default
// (equal values always encode to equal bytes, which replay and idempotency
// keys rely on), and a JSON one. It sits below sdk and activities, which
// both encode values, and imports nothing of Cairn's but history.
//
//	p, err := converter.Default().ToPayload(Payment{Invoice: "INV-9", Amount: 4200})
//	var back Payment
//	err = converter.Default().FromPayload(p, &back)
//
// sdk re-exports these names (sdk.Converter, sdk.DefaultConverter, …), so
// workflow code need not import this package.
package converter
