package history

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// An Event travels between processes (the HTTP API, workflow tasks) in two
// forms: as its checksummed envelope inside msgpack, and as the readable
// object of the JSON export inside JSON. Both round-trip exactly.

// MarshalJSON renders the event as in ExportJSON.
func (e Event) MarshalJSON() ([]byte, error) {
	if _, err := EncodeEvent(e); err != nil {
		return nil, err
	}
	x := jsonExporter{}
	x.event(e)
	return x.b, nil
}

// UnmarshalJSON reads an event written by MarshalJSON. Errors wrap
// ErrInvalid and name the field at fault.
func (e *Event) UnmarshalJSON(b []byte) error {
	ev, field, err := importEvent(b, 0)
	if err != nil {
		return &ImportError{Index: -1, Field: field, Err: err}
	}
	*e = ev
	return nil
}

// EncodeMsgpack writes the event's envelope as a msgpack bin value.
func (e Event) EncodeMsgpack(enc *msgpack.Encoder) error {
	b, err := EncodeEvent(e)
	if err != nil {
		return err
	}
	return enc.EncodeBytes(b)
}

// DecodeMsgpack reads an envelope written by EncodeMsgpack, verifying its
// checksum (a damaged one is ErrCorrupt).
func (e *Event) DecodeMsgpack(dec *msgpack.Decoder) error {
	b, err := dec.DecodeBytes()
	if err != nil {
		return fmt.Errorf("%w: event envelope: %w", ErrCorrupt, err)
	}
	ev, err := DecodeEvent(b, RunRef{}, 0)
	if err != nil {
		return err
	}
	*e = ev
	return nil
}
