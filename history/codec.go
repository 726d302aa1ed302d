package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// EnvelopeVersion is the version byte written at the start of every encoded
// event. Decoders refuse versions they do not know.
const EnvelopeVersion byte = 1

// headerLen is version (1) + type (1) + CRC32C (4).
const headerLen = 6

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CorruptError describes a record that failed its checksum or could not be
// decoded. It matches ErrCorrupt with errors.Is.
type CorruptError struct {
	// Run and EventID say where an event record was found (zero when the
	// damaged record is not an event).
	Run     RunRef
	EventID int64
	// Space and Key say where a damaged keyed record was found.
	Space  Space
	Key    []byte
	Reason string
}

// Error says what is damaged and where.
func (e *CorruptError) Error() string {
	if e.Run.WorkflowID != "" || e.EventID != 0 {
		return fmt.Sprintf("history: corrupt record: workflow %q run %q event %d: %s",
			e.Run.WorkflowID, e.Run.RunID, e.EventID, e.Reason)
	}
	return fmt.Sprintf("history: corrupt record: space %s key %x: %s", e.Space, e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// EncodeEvent encodes ev into its on-disk envelope:
//
//	version(1) type(1) crc32c(4) | uvarint(id) varint(unix nanos) msgpack(attrs)
//
// The CRC32C (Castagnoli) covers the version, the type and everything after
// the checksum. A zero Time is stored as 0.
func EncodeEvent(ev Event) ([]byte, error) {
	return AppendEvent(nil, ev)
}

// AppendEvent is EncodeEvent appending to dst.
func AppendEvent(dst []byte, ev Event) ([]byte, error) {
	t := ev.Type()
	if t == TypeUnknown || t >= typeCount {
		return nil, fmt.Errorf("%w: event %d has no attributes of a known type", ErrInvalid, ev.ID)
	}
	if ev.ID <= 0 {
		return nil, fmt.Errorf("%w: event id %d must be positive", ErrInvalid, ev.ID)
	}
	start := len(dst)
	dst = append(dst, EnvelopeVersion, byte(t), 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(ev.ID))
	var nanos int64
	if !ev.Time.IsZero() {
		nanos = ev.Time.UnixNano()
	}
	dst = binary.AppendVarint(dst, nanos)
	buf := bytes.NewBuffer(dst)
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	err := enc.Encode(ev.Attrs)
	msgpack.PutEncoder(enc)
	if err != nil {
		return nil, fmt.Errorf("history: encode event %d (%s): %w", ev.ID, t, err)
	}
	dst = buf.Bytes()
	rec := dst[start:]
	binary.BigEndian.PutUint32(rec[2:6], checksum(rec))
	return dst, nil
}

func checksum(rec []byte) uint32 {
	c := crc32.Update(0, castagnoli, rec[:2])
	return crc32.Update(c, castagnoli, rec[headerLen:])
}

// DecodeEvent decodes one envelope produced by EncodeEvent. Any damage —
// truncation, a flipped bit, an unknown version or type, trailing bytes —
// returns a *CorruptError (matching ErrCorrupt) that names run and the event
// id the caller expected; it never panics and never returns a partial event.
// want is the event id the record is stored under (0: don't check).
func DecodeEvent(data []byte, run RunRef, want int64) (Event, error) {
	fail := func(format string, args ...any) (Event, error) {
		return Event{}, &CorruptError{Run: run, EventID: want, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) < headerLen+2 {
		return fail("record of %d bytes is truncated", len(data))
	}
	if data[0] != EnvelopeVersion {
		return fail("unknown envelope version %d", data[0])
	}
	if got, sum := binary.BigEndian.Uint32(data[2:6]), checksum(data); got != sum {
		return fail("checksum mismatch (stored %08x, computed %08x)", got, sum)
	}
	t := EventType(data[1])
	attrs := NewAttributes(t)
	if attrs == nil {
		return fail("unknown event type %d", data[1])
	}
	rest := data[headerLen:]
	id, n := binary.Uvarint(rest)
	if n <= 0 || id == 0 || id > 1<<62 {
		return fail("bad event id")
	}
	rest = rest[n:]
	if want != 0 && int64(id) != want {
		return fail("record holds event %d", id)
	}
	nanos, n := binary.Varint(rest)
	if n <= 0 {
		return fail("bad timestamp")
	}
	rest = rest[n:]
	if err := decodeAttrs(rest, attrs); err != nil {
		return fail("%s body: %v", t, err)
	}
	ev := Event{ID: int64(id), Attrs: attrs}
	if nanos != 0 {
		ev.Time = time.Unix(0, nanos).UTC()
	}
	return ev, nil
}

var errTrailing = errors.New("trailing bytes after body")

func decodeAttrs(body []byte, attrs Attributes) (err error) {
	defer func() {
		// msgpack decodes by reflection into our own types; a decoder bug
		// must surface as a corrupt record, never as a crashed engine.
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	rd := bytes.NewReader(body)
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(rd)
	if err := dec.Decode(attrs); err != nil {
		return err
	}
	if rd.Len() != 0 {
		return errTrailing
	}
	return nil
}

// PeekEventType returns the event type stored in an envelope's header
// without verifying or decoding it.
func PeekEventType(data []byte) EventType {
	if len(data) < headerLen {
		return TypeUnknown
	}
	return EventType(data[1])
}
