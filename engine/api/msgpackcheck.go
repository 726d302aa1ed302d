package api

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxMsgpackDepth bounds the nesting of a request body. The deepest request
// (CompleteWorkflowTask → Commands → Command → ScheduleActivity → Options →
// RetryPolicy → NonRetryableErrorTypes) nests 7 levels.
const MaxMsgpackDepth = 32

var errMsgpackTruncated = errors.New("unexpected end of msgpack data")

// CheckMsgpack verifies, without allocating per element and without
// recursion, that b holds exactly one well-formed msgpack value nested at
// most maxDepth containers deep, in which no array or map declares more
// elements than bytes follow its header.
//
// msgpack.Unmarshal cannot be trusted with a body that fails this check:
// vmihailenco/msgpack v5.4.1 sizes a decoded slice of structs by the
// length its header declares (its allocation limit is never applied: the
// test `d.flags&disableAllocLimitFlag != 1` is always true), so a 14-byte
// body declaring 2³²-1 Commands makes the server allocate hundreds of
// gigabytes and die; and it skips unknown fields recursively, so deep
// nesting grows the stack without bound.
func CheckMsgpack(b []byte, maxDepth int) error {
	var stack []int64 // values still to read in each enclosing container
	need := int64(1)  // values still to read at the current level
	i := 0
	read := func(n int) (uint64, error) {
		if len(b)-i < n {
			return 0, errMsgpackTruncated
		}
		var v uint64
		switch n {
		case 1:
			v = uint64(b[i])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[i:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[i:]))
		}
		i += n
		return v, nil
	}
	for {
		for need == 0 {
			if len(stack) == 0 {
				if i != len(b) {
					return fmt.Errorf("%d bytes of trailing data after the msgpack value", len(b)-i)
				}
				return nil
			}
			need = stack[len(stack)-1]
			stack = stack[:len(stack)-1]
		}
		if i >= len(b) {
			return errMsgpackTruncated
		}
		at := i
		c := b[i]
		i++
		need--
		var (
			skip     uint64 // payload bytes after the header
			children uint64 // values nested in this one
			n        uint64
			err      error
		)
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		case c <= 0x8f: // fixmap
			children = 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			children = uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		case c == 0xc0, c == 0xc2, c == 0xc3: // nil, false, true
		case c == 0xc1:
			return fmt.Errorf("reserved msgpack code 0xc1 at byte %d", at)
		case c == 0xc4, c == 0xd9: // bin8, str8
			n, err = read(1)
			skip = n
		case c == 0xc5, c == 0xda: // bin16, str16
			n, err = read(2)
			skip = n
		case c == 0xc6, c == 0xdb: // bin32, str32
			n, err = read(4)
			skip = n
		case c == 0xc7: // ext8
			n, err = read(1)
			skip = n + 1
		case c == 0xc8: // ext16
			n, err = read(2)
			skip = n + 1
		case c == 0xc9: // ext32
			n, err = read(4)
			skip = n + 1
		case c == 0xca: // float32
			skip = 4
		case c == 0xcb: // float64
			skip = 8
		case c >= 0xcc && c <= 0xd3: // uint8…uint64, int8…int64
			skip = 1 << ((c - 0xcc) & 3)
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc: // array16
			children, err = read(2)
		case c == 0xdd: // array32
			children, err = read(4)
		case c == 0xde: // map16
			n, err = read(2)
			children = 2 * n
		case c == 0xdf: // map32
			n, err = read(4)
			children = 2 * n
		}
		if err != nil {
			return err
		}
		if skip > uint64(len(b)-i) {
			return errMsgpackTruncated
		}
		i += int(skip)
		if children == 0 {
			continue
		}
		// Every element takes at least one byte.
		if children > uint64(len(b)-i) {
			return fmt.Errorf("msgpack container at byte %d declares %d elements but only %d bytes follow", at, children, len(b)-i)
		}
		if len(stack) >= maxDepth {
			return fmt.Errorf("msgpack nested deeper than %d levels", maxDepth)
		}
		stack = append(stack, need)
		need = int64(children)
	}
}
