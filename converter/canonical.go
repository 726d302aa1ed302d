package converter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
)

var errBadMsgpack = errors.New("converter: malformed msgpack")

// canonicalizeMsgpack returns data with the entries of every map sorted by
// their encoded key bytes (recursively). It returns data itself when it is
// already canonical, which is the common case.
func canonicalizeMsgpack(data []byte) ([]byte, error) {
	n, sorted, err := scanMsgpack(data)
	if err != nil {
		return nil, err
	}
	if n != len(data) {
		return nil, errBadMsgpack
	}
	if sorted {
		return data, nil
	}
	out, _, err := appendCanonical(make([]byte, 0, len(data)), data)
	return out, err
}

// msgpackHeader decodes the header of the object at b: its header length,
// the length of an opaque body following the header, and for containers the
// number of child objects (maps count keys and values).
func msgpackHeader(b []byte) (hdr, body, children int, isMap bool, err error) {
	if len(b) == 0 {
		return 0, 0, 0, false, errBadMsgpack
	}
	c := b[0]
	need := func(n int) bool { return len(b) >= n }
	switch {
	case c <= 0x7f || c >= 0xe0:
		return 1, 0, 0, false, nil
	case c <= 0x8f:
		return 1, 0, 2 * int(c&0x0f), true, nil
	case c <= 0x9f:
		return 1, 0, int(c & 0x0f), false, nil
	case c <= 0xbf:
		return 1, int(c & 0x1f), 0, false, nil
	}
	switch c {
	case 0xc0, 0xc2, 0xc3:
		return 1, 0, 0, false, nil
	case 0xc4, 0xd9: // bin8, str8
		if !need(2) {
			break
		}
		return 2, int(b[1]), 0, false, nil
	case 0xc5, 0xda: // bin16, str16
		if !need(3) {
			break
		}
		return 3, int(binary.BigEndian.Uint16(b[1:])), 0, false, nil
	case 0xc6, 0xdb: // bin32, str32
		if !need(5) {
			break
		}
		return 5, int(binary.BigEndian.Uint32(b[1:])), 0, false, nil
	case 0xc7: // ext8
		if !need(2) {
			break
		}
		return 3, int(b[1]), 0, false, nil
	case 0xc8: // ext16
		if !need(3) {
			break
		}
		return 4, int(binary.BigEndian.Uint16(b[1:])), 0, false, nil
	case 0xc9: // ext32
		if !need(5) {
			break
		}
		return 6, int(binary.BigEndian.Uint32(b[1:])), 0, false, nil
	case 0xca:
		return 5, 0, 0, false, nil
	case 0xcb:
		return 9, 0, 0, false, nil
	case 0xcc, 0xd0:
		return 2, 0, 0, false, nil
	case 0xcd, 0xd1:
		return 3, 0, 0, false, nil
	case 0xce, 0xd2:
		return 5, 0, 0, false, nil
	case 0xcf, 0xd3:
		return 9, 0, 0, false, nil
	case 0xd4:
		return 3, 0, 0, false, nil
	case 0xd5:
		return 4, 0, 0, false, nil
	case 0xd6:
		return 6, 0, 0, false, nil
	case 0xd7:
		return 10, 0, 0, false, nil
	case 0xd8:
		return 18, 0, 0, false, nil
	case 0xdc:
		if !need(3) {
			break
		}
		return 3, 0, int(binary.BigEndian.Uint16(b[1:])), false, nil
	case 0xdd:
		if !need(5) {
			break
		}
		return 5, 0, int(binary.BigEndian.Uint32(b[1:])), false, nil
	case 0xde:
		if !need(3) {
			break
		}
		return 3, 0, 2 * int(binary.BigEndian.Uint16(b[1:])), true, nil
	case 0xdf:
		if !need(5) {
			break
		}
		return 5, 0, 2 * int(binary.BigEndian.Uint32(b[1:])), true, nil
	}
	return 0, 0, 0, false, errBadMsgpack
}

// scanMsgpack returns the length of the object at b and whether every map
// inside it already has its entries in canonical order.
func scanMsgpack(b []byte) (n int, sorted bool, err error) {
	hdr, body, children, isMap, err := msgpackHeader(b)
	if err != nil {
		return 0, false, err
	}
	n = hdr + body
	if n > len(b) || children > len(b)-n {
		return 0, false, errBadMsgpack
	}
	sorted = true
	var prevKey []byte
	for i := 0; i < children; i++ {
		m, s, err := scanMsgpack(b[n:])
		if err != nil {
			return 0, false, err
		}
		if !s {
			sorted = false
		}
		if isMap && i%2 == 0 {
			key := b[n : n+m]
			if prevKey != nil && bytes.Compare(prevKey, key) >= 0 {
				sorted = false
			}
			prevKey = key
		}
		n += m
	}
	return n, sorted, nil
}

// appendCanonical appends the canonical form of the object at b to dst.
func appendCanonical(dst, b []byte) ([]byte, int, error) {
	hdr, body, children, isMap, err := msgpackHeader(b)
	if err != nil {
		return nil, 0, err
	}
	n := hdr + body
	if n > len(b) || children > len(b)-n {
		return nil, 0, errBadMsgpack
	}
	dst = append(dst, b[:n]...)
	if !isMap {
		for i := 0; i < children; i++ {
			var m int
			if dst, m, err = appendCanonical(dst, b[n:]); err != nil {
				return nil, 0, err
			}
			n += m
		}
		return dst, n, nil
	}
	type entry struct{ key, val []byte }
	entries := make([]entry, children/2)
	for i := range entries {
		var k, v []byte
		var m int
		if k, m, err = appendCanonical(nil, b[n:]); err != nil {
			return nil, 0, err
		}
		n += m
		if v, m, err = appendCanonical(nil, b[n:]); err != nil {
			return nil, 0, err
		}
		n += m
		entries[i] = entry{k, v}
	}
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	for _, e := range entries {
		dst = append(dst, e.key...)
		dst = append(dst, e.val...)
	}
	return dst, n, nil
}
