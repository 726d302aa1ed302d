package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"reflect"
	"slices"
	"sync"
	"time"
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
	Space Space
	Key   []byte
	// File and Offset say where damage to a store's own files was found
	// (File empty when the damage is to a record; Offset -1 when unknown).
	File   string
	Offset int64
	Reason string
}

// Error says what is damaged and where.
func (e *CorruptError) Error() string {
	if e.File != "" {
		if e.Offset < 0 {
			return fmt.Sprintf("history: corrupt record: file %s: %s", e.File, e.Reason)
		}
		return fmt.Sprintf("history: corrupt record: file %s offset %d: %s", e.File, e.Offset, e.Reason)
	}
	if e.Space == 0 && e.Key == nil && e.Run.WorkflowID == "" && e.EventID == 0 {
		return "history: corrupt record: " + e.Reason
	}
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
// the checksum. A zero Time is stored as 0 (and a time of exactly the Unix
// epoch therefore reads back as the zero Time).
//
// The attributes are one MessagePack array holding the struct's fields in
// declaration order; nested structs (Payload, Failure, ActivityOptions,
// RetryPolicy) are arrays too, and nil pointers and nil slices are nil.
// These are exactly the bytes github.com/vmihailenco/msgpack/v5 writes for
// the struct with UseArrayEncodedStructs(true) and UseCompactInts(true)
// (codec_test.go checks it for every type); durations are integer
// nanoseconds and times are MessagePack timestamps (extension -1). The
// fields are encoded and decoded without reflection, from the field lists in
// fields.go, by the reader and writer in msgpack.go: several times faster
// than the library, with one allocation for all of a record's strings and
// payload bytes (see also EventDecoder).
//
// Compatibility rules, because fields are identified by position:
//   - new fields are only ever appended at the end of a struct; existing
//     fields are never reordered, removed or retyped;
//   - a decoder reading a shorter array (a record written before a field
//     existed) leaves the missing fields zero;
//   - a decoder reading a longer array (a record written by a newer version)
//     skips the extra elements, so an older binary can still read it.
//
// EncodeEvent refuses (with ErrInvalid) an event whose attributes are nil or
// of an unknown type, a non-positive ID, a Time outside the years 1678-2262
// (int64 nanoseconds) and an attribute time outside years 1-9999.
func EncodeEvent(ev Event) ([]byte, error) {
	return AppendEvent(nil, ev)
}

// AppendEvent is EncodeEvent appending to dst. On error it returns nil.
func AppendEvent(dst []byte, ev Event) ([]byte, error) {
	t := ev.Type()
	if t == TypeUnknown || t >= typeCount {
		return nil, fmt.Errorf("%w: event %d has no attributes of a known type", ErrInvalid, ev.ID)
	}
	f, ok := ev.Attrs.(fielder)
	if !ok || isNilPointer(ev.Attrs) {
		return nil, fmt.Errorf("%w: event %d has nil or foreign %s attributes", ErrInvalid, ev.ID, t)
	}
	if ev.ID <= 0 {
		return nil, fmt.Errorf("%w: event id %d must be positive", ErrInvalid, ev.ID)
	}
	var nanos int64
	if !ev.Time.IsZero() {
		nanos = ev.Time.UnixNano()
		if !time.Unix(0, nanos).Equal(ev.Time) {
			return nil, fmt.Errorf("%w: event %d: time %s is outside the years 1678-2262 the envelope can hold", ErrInvalid, ev.ID, ev.Time)
		}
	}
	// Encode the body into a pooled scratch buffer first, so that dst grows
	// once, to the exact size.
	enc := encoderPool.Get().(*binEncoder)
	enc.w = mpWriter{b: enc.w.b[:0]}
	enc.writeStruct(f)
	if err := enc.w.err; err != nil {
		encoderPool.Put(enc)
		return nil, fmt.Errorf("%w: encode event %d (%s): %w", ErrInvalid, ev.ID, t, err)
	}
	start := len(dst)
	zigzag := uint64(nanos<<1) ^ uint64(nanos>>63) // how AppendVarint writes nanos
	dst = slices.Grow(dst, headerLen+uvarintLen(uint64(ev.ID))+uvarintLen(zigzag)+len(enc.w.b))
	dst = append(dst, EnvelopeVersion, byte(t), 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, uint64(ev.ID))
	dst = binary.AppendVarint(dst, nanos)
	dst = append(dst, enc.w.b...)
	if cap(enc.w.b) <= maxPooledBuffer {
		encoderPool.Put(enc)
	}
	rec := dst[start:]
	binary.BigEndian.PutUint32(rec[2:6], checksum(rec))
	return dst, nil
}

// uvarintLen returns the length of x written by binary.AppendUvarint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// maxPooledBuffer bounds the scratch buffers kept for reuse.
const maxPooledBuffer = 64 << 10

var (
	encoderPool = sync.Pool{New: func() any { return &binEncoder{w: mpWriter{b: make([]byte, 0, 512)}} }}
	decoderPool = sync.Pool{New: func() any { return new(binDecoder) }}
)

// isNilPointer reports whether a is a typed nil pointer, whose fields
// method would dereference nil. The most frequent types are checked without
// reflection.
func isNilPointer(a Attributes) bool {
	switch p := a.(type) {
	case *ActivityScheduled:
		return p == nil
	case *ActivityStarted:
		return p == nil
	case *ActivityCompleted:
		return p == nil
	case *WorkflowTaskCompleted:
		return p == nil
	}
	return reflect.ValueOf(a).IsNil()
}

func checksum(rec []byte) uint32 {
	c := crc32.Update(0, castagnoli, rec[:2])
	return crc32.Update(c, castagnoli, rec[headerLen:])
}

// DecodeEvent decodes one envelope produced by EncodeEvent. Any damage —
// truncation, a flipped bit, an unknown version or type, trailing bytes —
// returns a *CorruptError (matching ErrCorrupt) that names run and the event
// id the caller expected; it never panics and never returns a partial event.
// want is the event id the record is stored under (0: don't check; the
// error then names the id read from the record, when it could be read).
//
// The decoded event's Time and attribute times are in UTC. Strings and
// payload data are copies: data may be reused once DecodeEvent returns.
func DecodeEvent(data []byte, run RunRef, want int64) (Event, error) {
	return decodeEvent(data, run, want, nil)
}

// decodeEvent is DecodeEvent, allocating from ed when it is not nil.
func decodeEvent(data []byte, run RunRef, want int64, ed *EventDecoder) (Event, error) {
	where := want
	fail := func(format string, args ...any) (Event, error) {
		return Event{}, &CorruptError{Run: run, EventID: where, Reason: fmt.Sprintf(format, args...)}
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
	if t == TypeUnknown || t >= typeCount {
		return fail("unknown event type %d", data[1])
	}
	rest := data[headerLen:]
	id, n := binary.Uvarint(rest)
	if n <= 0 || id == 0 || id > 1<<62 {
		return fail("bad event id")
	}
	if where == 0 {
		where = int64(id)
	}
	rest = rest[n:]
	if want != 0 && int64(id) != want {
		return fail("record holds event %d", id)
	}
	nanos, n := binary.Varint(rest)
	if n <= 0 {
		return fail("bad timestamp")
	}
	attrs, err := decodeAttrs(rest[n:], t, ed)
	if err != nil {
		return fail("%s body: %v", t, err)
	}
	ev := Event{ID: int64(id), Attrs: attrs}
	if nanos != 0 {
		ev.Time = time.Unix(0, nanos).UTC()
	}
	return ev, nil
}

var errTrailing = errors.New("trailing bytes after body")

// decodeAttrs decodes the body of an event of type t.
func decodeAttrs(body []byte, t EventType, ed *EventDecoder) (attrs Attributes, err error) {
	defer func() {
		// The decoder checks every length and never indexes out of range;
		// this is a last resort so that a bug surfaces as a corrupt record,
		// never as a crashed engine.
		if r := recover(); r != nil {
			attrs, err = nil, fmt.Errorf("decoder panic: %v", r)
		}
	}()
	if len(body) == 0 || body[0] == mpNil {
		return nil, errors.New("body is not an array")
	}
	attrs, f := ed.newAttrs(t)
	if attrs == nil {
		return nil, fmt.Errorf("no decoder for event type %d", t)
	}
	var d *binDecoder
	if ed != nil {
		d = &ed.dec
	} else {
		d = decoderPool.Get().(*binDecoder)
	}
	// The decoded strings and payloads are views of one private copy of
	// the body (see mpReader.owned).
	d.reset(ed.copyBody(body), ed)
	d.readStruct(t.String(), f)
	switch {
	case d.r.err != nil && d.errField == "":
		err = d.r.err
	case d.r.err != nil:
		err = fmt.Errorf("%s: %w", d.fieldPath(), d.r.err)
	case d.r.remaining() != 0:
		err = errTrailing
	}
	d.reset(nil, nil)
	if ed == nil {
		decoderPool.Put(d)
	}
	if err != nil {
		return nil, err
	}
	return attrs, nil
}

// PeekEventType returns the event type stored in an envelope's header
// without verifying or decoding it.
func PeekEventType(data []byte) EventType {
	if len(data) < headerLen {
		return TypeUnknown
	}
	return EventType(data[1])
}
