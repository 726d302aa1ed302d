package history

import (
	"bytes"
	"reflect"
	"testing"
)

// TestEventDecoderBodiesOfEverySize: an EventDecoder decodes a body of any
// size as DecodeEvent does — first in a fresh decoder (whose first byte
// block is 1 KiB), and one after another in a shared one — including the
// bodies above a block and up to maxSharedBody, which it copies into its
// blocks. (A body of 1–4 KiB read first used to be cut to the block's
// size: a decoder panic, reported as a corrupt record, and the run
// quarantined by the engine on PostgreSQL, whose reads use a decoder.)
func TestEventDecoderBodiesOfEverySize(t *testing.T) {
	var shared EventDecoder
	for _, size := range []int{0, 1, 100, minByteBlock - 64, minByteBlock, minByteBlock + 1, 1586, 2*minByteBlock + 7,
		maxSharedBody - 64, maxSharedBody, maxSharedBody + 1, 3 * maxSharedBody} {
		ev := Event{ID: 7, Attrs: &MarkerRecorded{Name: "SideEffect", Data: Payload{Encoding: "binary", Data: bytes.Repeat([]byte{'x'}, size)}}}
		rec := mustEncode(t, ev)
		want, err := DecodeEvent(rec, sampleRun, ev.ID)
		if err != nil {
			t.Fatalf("payload of %d bytes: DecodeEvent: %v", size, err)
		}
		var fresh EventDecoder
		for name, d := range map[string]*EventDecoder{"fresh": &fresh, "shared": &shared} {
			got, err := d.Decode(rec, sampleRun, ev.ID)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("payload of %d bytes, %s decoder: %v", size, name, err)
			}
		}
	}
}
