package history

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestRecordEnvelope: a sealed record reads back; damage, a value moved to
// another key or space, and a short record are refused naming space and key.
func TestRecordEnvelope(t *testing.T) {
	id := RecordID(SpaceLedger, []byte("pay-1"))
	if !bytes.Equal(id, []byte("epay-1")) {
		t.Fatalf("RecordID = %q, want the ledger letter then the key", id)
	}
	sealed := SealRecord(id, []byte("paid"))
	got, err := UnsealRecord(id, sealed)
	if err != nil || string(got) != "paid" {
		t.Fatalf("UnsealRecord = %q, %v", got, err)
	}
	// The format is fixed: CRC32C of "epay-1paid", as badgerstore has always written it.
	if want := []byte{0x6f, 0x48, 0xe0, 0x0a}; !bytes.Equal(sealed[:4], want) {
		t.Fatalf("checksum %x, want %x (the record envelope must never change)", sealed[:4], want)
	}
	damaged := bytes.Clone(sealed)
	damaged[5] ^= 1
	cases := map[string]struct {
		id, stored []byte
	}{
		"damaged value": {id, damaged},
		"another key":   {RecordID(SpaceLedger, []byte("pay-2")), sealed},
		"another space": {RecordID(SpaceTask, []byte("pay-1")), sealed},
		"short record":  {id, sealed[:3]},
		"checksum only": {id, sealed[:4]},
		"trailing byte": {id, append(bytes.Clone(sealed), 0)},
		"no identity":   {nil, sealed},
	}
	for name, c := range cases {
		_, err := UnsealRecord(c.id, c.stored)
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a CorruptError", name, err)
		}
		if len(c.id) > 0 && (ce.Space != SpaceOfID(c.id) || !strings.Contains(err.Error(), ce.Space.String())) {
			t.Fatalf("%s: %v does not name the space", name, err)
		}
	}
}

// SpaceOfID is the space a RecordID names (test helper).
func SpaceOfID(id []byte) Space {
	sp, _ := spaceOfLetter(id[0])
	return sp
}

// TestSpaceLetters: every valid space has a distinct letter, and RecordID
// starts with it.
func TestSpaceLetters(t *testing.T) {
	seen := map[byte]Space{}
	for sp := Space(1); sp.Valid(); sp++ {
		l := sp.Letter()
		if l == 0 {
			t.Fatalf("space %s has no letter", sp)
		}
		if prev, dup := seen[l]; dup {
			t.Fatalf("spaces %s and %s share the letter %c", prev, sp, l)
		}
		seen[l] = sp
		if back, ok := spaceOfLetter(l); !ok || back != sp {
			t.Fatalf("letter %c maps back to %s", l, back)
		}
	}
	if Space(0).Letter() != 0 || Space(200).Letter() != 0 {
		t.Fatal("an invalid space has a letter")
	}
}
