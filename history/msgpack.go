package history

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// This file holds a minimal MessagePack reader and writer working directly
// on byte slices. The event codec and the JSON export use it instead of the
// reflection-based github.com/vmihailenco/msgpack/v5 encoder and decoder,
// which cost several microseconds per event. The bytes are ordinary
// MessagePack: the writer makes exactly the choices that library makes with
// UseCompactInts(true) (shortest int, string, binary, array and map headers;
// float64 for floats; nil for nil slices and pointers; timestamps as
// extension -1 in the shortest of its 4, 8 or 12 byte forms), and the tests
// check the two agree byte for byte.
//
// The reader never panics and never allocates more than its input justifies:
// every length is checked against the bytes that remain before anything is
// read or allocated, and skipping values is iterative, so deeply nested input
// cannot exhaust the stack.

// MessagePack format codes used here.
const (
	mpNil      = 0xc0
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpBin8     = 0xc4
	mpBin16    = 0xc5
	mpBin32    = 0xc6
	mpExt8     = 0xc7
	mpExt16    = 0xc8
	mpExt32    = 0xc9
	mpFloat32  = 0xca
	mpFloat64  = 0xcb
	mpUint8    = 0xcc
	mpUint16   = 0xcd
	mpUint32   = 0xce
	mpUint64   = 0xcf
	mpInt8     = 0xd0
	mpInt16    = 0xd1
	mpInt32    = 0xd2
	mpInt64    = 0xd3
	mpFixExt1  = 0xd4
	mpFixExt2  = 0xd5
	mpFixExt4  = 0xd6
	mpFixExt8  = 0xd7
	mpFixExt16 = 0xd8
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	mpArray16  = 0xdc
	mpArray32  = 0xdd
	mpMap16    = 0xde
	mpMap32    = 0xdf

	mpFixMap   = 0x80
	mpFixArray = 0x90
	mpFixStr   = 0xa0

	// mpTimeExt is the extension type of MessagePack timestamps.
	mpTimeExt = -1
)

// Bounds of the times an attribute may hold: years 1 through 9999, the range
// RFC 3339 (and so the JSON export) can represent. The zero time.Time is
// year 1.
var (
	minAttrTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	maxAttrTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
)

// mpWriter appends MessagePack values to b.
type mpWriter struct {
	b   []byte
	err error // first value that could not be encoded
}

func (w *mpWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *mpWriter) writeNil() { w.b = append(w.b, mpNil) }

func (w *mpWriter) writeBool(v bool) {
	if v {
		w.b = append(w.b, mpTrue)
	} else {
		w.b = append(w.b, mpFalse)
	}
}

func (w *mpWriter) writeUint(v uint64) {
	switch {
	case v <= math.MaxInt8:
		w.b = append(w.b, byte(v))
	case v <= math.MaxUint8:
		w.b = append(w.b, mpUint8, byte(v))
	case v <= math.MaxUint16:
		w.b = append(w.b, mpUint16, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		w.b = append(w.b, mpUint32)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(v))
	default:
		w.b = append(w.b, mpUint64)
		w.b = binary.BigEndian.AppendUint64(w.b, v)
	}
}

func (w *mpWriter) writeInt(v int64) {
	switch {
	case v >= 0:
		w.writeUint(uint64(v))
	case v >= -32:
		w.b = append(w.b, byte(v))
	case v >= math.MinInt8:
		w.b = append(w.b, mpInt8, byte(v))
	case v >= math.MinInt16:
		w.b = append(w.b, mpInt16, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		w.b = append(w.b, mpInt32)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(v))
	default:
		w.b = append(w.b, mpInt64)
		w.b = binary.BigEndian.AppendUint64(w.b, uint64(v))
	}
}

func (w *mpWriter) writeFloat64(v float64) {
	w.b = append(w.b, mpFloat64)
	w.b = binary.BigEndian.AppendUint64(w.b, math.Float64bits(v))
}

func (w *mpWriter) writeStrHeader(n int) {
	switch {
	case n < 32:
		w.b = append(w.b, mpFixStr|byte(n))
	case n <= math.MaxUint8:
		w.b = append(w.b, mpStr8, byte(n))
	case n <= math.MaxUint16:
		w.b = append(w.b, mpStr16, byte(n>>8), byte(n))
	case uint64(n) <= math.MaxUint32:
		w.b = append(w.b, mpStr32)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(n))
	default:
		w.fail(fmt.Errorf("string of %d bytes is too long", n))
	}
}

func (w *mpWriter) writeString(s string) {
	w.writeStrHeader(len(s))
	w.b = append(w.b, s...)
}

// writeBin writes a nil slice as nil and any other slice, even an empty
// one, as binary.
func (w *mpWriter) writeBin(v []byte) {
	n := len(v)
	switch {
	case v == nil:
		w.writeNil()
		return
	case n <= math.MaxUint8:
		w.b = append(w.b, mpBin8, byte(n))
	case n <= math.MaxUint16:
		w.b = append(w.b, mpBin16, byte(n>>8), byte(n))
	case uint64(n) <= math.MaxUint32:
		w.b = append(w.b, mpBin32)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(n))
	default:
		w.fail(fmt.Errorf("binary of %d bytes is too long", n))
		return
	}
	w.b = append(w.b, v...)
}

func (w *mpWriter) writeArrayHeader(n int) {
	switch {
	case n < 16:
		w.b = append(w.b, mpFixArray|byte(n))
	case n <= math.MaxUint16:
		w.b = append(w.b, mpArray16, byte(n>>8), byte(n))
	case uint64(n) <= math.MaxUint32:
		w.b = append(w.b, mpArray32)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(n))
	default:
		w.fail(fmt.Errorf("array of %d elements is too long", n))
	}
}

func (w *mpWriter) writeMapHeader(n int) {
	switch {
	case n < 16:
		w.b = append(w.b, mpFixMap|byte(n))
	case n <= math.MaxUint16:
		w.b = append(w.b, mpMap16, byte(n>>8), byte(n))
	case uint64(n) <= math.MaxUint32:
		w.b = append(w.b, mpMap32)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(n))
	default:
		w.fail(fmt.Errorf("map of %d entries is too long", n))
	}
}

// writeTime writes t as a MessagePack timestamp (extension -1). Times
// outside years 1-9999 are refused; the zero time is year 1 and is written
// like any other time.
func (w *mpWriter) writeTime(t time.Time) {
	sec, nsec := t.Unix(), uint64(t.Nanosecond())
	if sec < minAttrTime || sec > maxAttrTime {
		w.fail(fmt.Errorf("time %s is outside years 1-9999", t))
		return
	}
	if uint64(sec)>>34 == 0 {
		data := nsec<<34 | uint64(sec)
		if data>>32 == 0 {
			w.b = append(w.b, mpFixExt4, 0xff)
			w.b = binary.BigEndian.AppendUint32(w.b, uint32(data))
			return
		}
		w.b = append(w.b, mpFixExt8, 0xff)
		w.b = binary.BigEndian.AppendUint64(w.b, data)
		return
	}
	w.b = append(w.b, mpExt8, 12, 0xff)
	w.b = binary.BigEndian.AppendUint32(w.b, uint32(nsec))
	w.b = binary.BigEndian.AppendUint64(w.b, uint64(sec))
}

// errShort reports input that ends in the middle of a value.
var errShort = errors.New("unexpected end of data")

// mpReader reads MessagePack values from b. The first error sticks: after
// it every read returns a zero value, so callers check err once at the end.
//
// When owned is set, b is a private copy that nothing else will ever write:
// strings and binary values are then returned as views of it instead of
// copies (one allocation per record instead of one per field). Views never
// overlap, so a caller writing into a returned []byte cannot change a
// returned string; the binary views have their capacity cut to their length
// so appending to one reallocates.
type mpReader struct {
	b   []byte
	off int // next byte to read; reading advances off rather than b so
	// that a reader on the heap costs no write barrier per value
	err   error
	owned bool
}

// remaining returns the number of unread bytes.
func (r *mpReader) remaining() int { return len(r.b) - r.off }

func (r *mpReader) fail(err error) {
	if r.err == nil {
		r.err = err
		r.off = len(r.b)
	}
}

func (r *mpReader) failf(format string, args ...any) {
	r.fail(fmt.Errorf(format, args...))
}

// peek returns the next format code without consuming it.
func (r *mpReader) peek() (byte, bool) {
	if r.off >= len(r.b) {
		r.fail(errShort)
		return 0, false
	}
	return r.b[r.off], true
}

func (r *mpReader) readCode() (byte, bool) {
	if r.off >= len(r.b) {
		r.fail(errShort)
		return 0, false
	}
	c := r.b[r.off]
	r.off++
	return c, true
}

// readN consumes n bytes and returns them (aliasing the input, with the
// capacity cut to n).
func (r *mpReader) readN(n uint64) ([]byte, bool) {
	if uint64(r.remaining()) < n {
		r.fail(errShort)
		return nil, false
	}
	start := r.off
	r.off += int(n)
	return r.b[start:r.off:r.off], true
}

// readLen reads a big-endian length of size 1, 2 or 4 bytes.
func (r *mpReader) readLen(size int) (uint64, bool) {
	p, ok := r.readN(uint64(size))
	if !ok {
		return 0, false
	}
	switch size {
	case 1:
		return uint64(p[0]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), true
	default:
		return uint64(binary.BigEndian.Uint32(p)), true
	}
}

// codeName describes a format code for error messages.
func codeName(c byte) string {
	switch {
	case c <= 0x7f || c >= 0xe0:
		return "integer"
	case c <= 0x8f || c == mpMap16 || c == mpMap32:
		return "map"
	case c <= 0x9f || c == mpArray16 || c == mpArray32:
		return "array"
	case c <= 0xbf || c == mpStr8 || c == mpStr16 || c == mpStr32:
		return "string"
	}
	switch c {
	case mpNil:
		return "nil"
	case mpFalse, mpTrue:
		return "bool"
	case mpBin8, mpBin16, mpBin32:
		return "binary"
	case mpFloat32, mpFloat64:
		return "float"
	case mpUint8, mpUint16, mpUint32, mpUint64, mpInt8, mpInt16, mpInt32, mpInt64:
		return "integer"
	case mpExt8, mpExt16, mpExt32, mpFixExt1, mpFixExt2, mpFixExt4, mpFixExt8, mpFixExt16:
		return "extension"
	}
	return fmt.Sprintf("reserved code 0x%02x", c)
}

func (r *mpReader) unexpected(c byte, want string) {
	r.failf("expected %s, found %s", want, codeName(c))
}

// readNil consumes a nil if one is next and reports whether it did.
func (r *mpReader) readNil() bool {
	if r.off < len(r.b) && r.b[r.off] == mpNil {
		r.off++
		return true
	}
	return false
}

// readArrayLen reads an array header. A nil reads as length 0 with isNil
// set. The length is checked against the remaining input (every element
// takes at least one byte).
func (r *mpReader) readArrayLen() (n int, isNil bool) {
	c, ok := r.readCode()
	if !ok {
		return 0, false
	}
	var l uint64
	switch {
	case c&0xf0 == mpFixArray:
		l = uint64(c & 0x0f)
	case c == mpArray16:
		l, _ = r.readLen(2)
	case c == mpArray32:
		l, _ = r.readLen(4)
	case c == mpNil:
		return 0, true
	default:
		r.unexpected(c, "array")
		return 0, false
	}
	if l > uint64(r.remaining()) {
		r.fail(errShort)
		return 0, false
	}
	return int(l), false
}

// readMapLen reads a map header (nil reads as 0), checked like readArrayLen.
func (r *mpReader) readMapLen() (n int, isNil bool) {
	c, ok := r.readCode()
	if !ok {
		return 0, false
	}
	var l uint64
	switch {
	case c&0xf0 == mpFixMap:
		l = uint64(c & 0x0f)
	case c == mpMap16:
		l, _ = r.readLen(2)
	case c == mpMap32:
		l, _ = r.readLen(4)
	case c == mpNil:
		return 0, true
	default:
		r.unexpected(c, "map")
		return 0, false
	}
	if 2*l > uint64(r.remaining()) {
		r.fail(errShort)
		return 0, false
	}
	return int(l), false
}

// readStrBytes reads a string (nil reads as empty) and returns its bytes,
// aliasing the input.
func (r *mpReader) readStrBytes() []byte {
	c, ok := r.readCode()
	if !ok {
		return nil
	}
	var l uint64
	switch {
	case c&0xe0 == mpFixStr:
		l = uint64(c & 0x1f)
	case c == mpStr8:
		l, _ = r.readLen(1)
	case c == mpStr16:
		l, _ = r.readLen(2)
	case c == mpStr32:
		l, _ = r.readLen(4)
	case c == mpNil:
		return nil
	default:
		r.unexpected(c, "string")
		return nil
	}
	p, _ := r.readN(l)
	return p
}

func (r *mpReader) readString() string {
	p := r.readStrBytes()
	if len(p) == 0 {
		return ""
	}
	if r.owned {
		return unsafe.String(&p[0], len(p))
	}
	return string(p)
}

// readBin reads binary data into a fresh slice. Nil reads as a nil slice,
// an empty binary as an empty non-nil slice. A string is accepted too.
func (r *mpReader) readBin() []byte {
	c, ok := r.readCode()
	if !ok {
		return nil
	}
	var l uint64
	switch {
	case c == mpBin8 || c == mpStr8:
		l, _ = r.readLen(1)
	case c == mpBin16 || c == mpStr16:
		l, _ = r.readLen(2)
	case c == mpBin32 || c == mpStr32:
		l, _ = r.readLen(4)
	case c&0xe0 == mpFixStr:
		l = uint64(c & 0x1f)
	case c == mpNil:
		return nil
	default:
		r.unexpected(c, "binary")
		return nil
	}
	p, ok := r.readN(l)
	if !ok || r.owned {
		return p
	}
	return append(make([]byte, 0, len(p)), p...)
}

func (r *mpReader) readBool() bool {
	c, ok := r.readCode()
	if !ok {
		return false
	}
	switch c {
	case mpTrue:
		return true
	case mpFalse, mpNil:
		return false
	}
	r.unexpected(c, "bool")
	return false
}

// readInt reads any integer encoding (nil reads as 0) that fits in
// [lo, hi].
func (r *mpReader) readInt(lo, hi int64) int64 {
	c, ok := r.readCode()
	if !ok {
		return 0
	}
	var v int64
	switch {
	case c <= 0x7f:
		return int64(c) // fits every range used here
	case c >= 0xe0:
		v = int64(int8(c))
	case c == mpNil:
		return 0
	case c == mpUint8:
		u, _ := r.readLen(1)
		v = int64(u)
	case c == mpUint16:
		u, _ := r.readLen(2)
		v = int64(u)
	case c == mpUint32:
		u, _ := r.readLen(4)
		v = int64(u)
	case c == mpUint64:
		p, ok := r.readN(8)
		if !ok {
			return 0
		}
		u := binary.BigEndian.Uint64(p)
		if u > math.MaxInt64 {
			r.failf("integer %d out of range", u)
			return 0
		}
		v = int64(u)
	case c == mpInt8:
		u, _ := r.readLen(1)
		v = int64(int8(u))
	case c == mpInt16:
		u, _ := r.readLen(2)
		v = int64(int16(u))
	case c == mpInt32:
		u, _ := r.readLen(4)
		v = int64(int32(u))
	case c == mpInt64:
		p, ok := r.readN(8)
		if !ok {
			return 0
		}
		v = int64(binary.BigEndian.Uint64(p))
	default:
		r.unexpected(c, "integer")
		return 0
	}
	if v < lo || v > hi {
		r.failf("integer %d out of range", v)
		return 0
	}
	return v
}

// readFloat reads a float32, a float64 or an integer (nil reads as 0).
func (r *mpReader) readFloat() float64 {
	c, ok := r.peek()
	if !ok {
		return 0
	}
	switch c {
	case mpFloat64:
		r.off++
		p, ok := r.readN(8)
		if !ok {
			return 0
		}
		return math.Float64frombits(binary.BigEndian.Uint64(p))
	case mpFloat32:
		r.off++
		p, ok := r.readN(4)
		if !ok {
			return 0
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(p)))
	}
	return float64(r.readInt(math.MinInt64, math.MaxInt64))
}

// readExtHeader reads an extension header and returns its type and length.
func (r *mpReader) readExtHeader() (typ int8, n uint64, ok bool) {
	c, ok := r.readCode()
	if !ok {
		return 0, 0, false
	}
	switch c {
	case mpFixExt1:
		n = 1
	case mpFixExt2:
		n = 2
	case mpFixExt4:
		n = 4
	case mpFixExt8:
		n = 8
	case mpFixExt16:
		n = 16
	case mpExt8:
		n, ok = r.readLen(1)
	case mpExt16:
		n, ok = r.readLen(2)
	case mpExt32:
		n, ok = r.readLen(4)
	default:
		r.unexpected(c, "extension")
		return 0, 0, false
	}
	if !ok {
		return 0, 0, false
	}
	t, ok := r.readLen(1)
	if !ok {
		return 0, 0, false
	}
	if n > uint64(r.remaining()) {
		r.fail(errShort)
		return 0, 0, false
	}
	return int8(t), n, true
}

// readTime reads a MessagePack timestamp (nil reads as the zero time). The
// result is in UTC; times outside years 1-9999 and nanoseconds of 10⁹ or
// more are refused.
func (r *mpReader) readTime() time.Time {
	if r.readNil() {
		return time.Time{}
	}
	typ, n, ok := r.readExtHeader()
	if !ok {
		return time.Time{}
	}
	if typ != mpTimeExt {
		r.failf("expected timestamp, found extension %d", typ)
		return time.Time{}
	}
	p, _ := r.readN(n)
	t, err := decodeTimestamp(p)
	if err != nil {
		r.fail(err)
	}
	return t
}

// decodeTimestamp decodes the payload of a timestamp extension.
func decodeTimestamp(p []byte) (time.Time, error) {
	var sec int64
	var nsec uint64
	switch len(p) {
	case 4:
		sec = int64(binary.BigEndian.Uint32(p))
	case 8:
		data := binary.BigEndian.Uint64(p)
		nsec, sec = data>>34, int64(data&(1<<34-1))
	case 12:
		nsec, sec = uint64(binary.BigEndian.Uint32(p)), int64(binary.BigEndian.Uint64(p[4:]))
	default:
		return time.Time{}, fmt.Errorf("timestamp of %d bytes", len(p))
	}
	if nsec >= 1e9 {
		return time.Time{}, fmt.Errorf("timestamp with %d nanoseconds", nsec)
	}
	if sec < minAttrTime || sec > maxAttrTime {
		return time.Time{}, fmt.Errorf("timestamp %d is outside years 1-9999", sec)
	}
	return time.Unix(sec, int64(nsec)).UTC(), nil
}

// skip consumes one complete value of any type. It is iterative: pending
// counts the values still to be consumed, so nesting depth costs no stack.
func (r *mpReader) skip() {
	for pending := uint64(1); pending > 0 && r.err == nil; pending-- {
		if pending > uint64(r.remaining()) {
			r.fail(errShort)
			return
		}
		c, ok := r.readCode()
		if !ok {
			return
		}
		switch {
		case c <= 0x7f || c >= 0xe0 || c == mpNil || c == mpFalse || c == mpTrue:
		case c&0xf0 == mpFixMap:
			pending += 2 * uint64(c&0x0f)
		case c&0xf0 == mpFixArray:
			pending += uint64(c & 0x0f)
		case c&0xe0 == mpFixStr:
			r.readN(uint64(c & 0x1f))
		case c == mpBin8 || c == mpStr8:
			l, _ := r.readLen(1)
			r.readN(l)
		case c == mpBin16 || c == mpStr16:
			l, _ := r.readLen(2)
			r.readN(l)
		case c == mpBin32 || c == mpStr32:
			l, _ := r.readLen(4)
			r.readN(l)
		case c == mpUint8 || c == mpInt8:
			r.readN(1)
		case c == mpUint16 || c == mpInt16:
			r.readN(2)
		case c == mpUint32 || c == mpInt32 || c == mpFloat32:
			r.readN(4)
		case c == mpUint64 || c == mpInt64 || c == mpFloat64:
			r.readN(8)
		case c == mpArray16:
			l, _ := r.readLen(2)
			pending += l
		case c == mpArray32:
			l, _ := r.readLen(4)
			pending += l
		case c == mpMap16:
			l, _ := r.readLen(2)
			pending += 2 * l
		case c == mpMap32:
			l, _ := r.readLen(4)
			pending += 2 * l
		case c >= mpFixExt1 && c <= mpFixExt16:
			r.readN(1 + 1<<(c-mpFixExt1))
		case c == mpExt8:
			l, _ := r.readLen(1)
			r.readN(l + 1)
		case c == mpExt16:
			l, _ := r.readLen(2)
			r.readN(l + 1)
		case c == mpExt32:
			l, _ := r.readLen(4)
			r.readN(l + 1)
		default:
			r.unexpected(c, "a value")
		}
	}
}
