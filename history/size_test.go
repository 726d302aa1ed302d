package history

import "testing"

// EventSize is the length EncodeEvent writes, for every sample event.
func TestEventSizeIsTheEncodedLength(t *testing.T) {
	for _, ev := range samples() {
		b, err := EncodeEvent(ev)
		if err != nil {
			t.Fatalf("%s: %v", ev.Type(), err)
		}
		if got := EventSize(ev); got != int64(len(b)) {
			t.Errorf("%s: EventSize %d, encoded %d bytes", ev.Type(), got, len(b))
		}
	}
	big := Event{ID: 70000, Attrs: &SignalReceived{Name: string(make([]byte, 300)), Input: Payload{Encoding: "json", Data: make([]byte, 70000)}}}
	b, _ := EncodeEvent(big)
	if got := EventSize(big); got != int64(len(b)) {
		t.Errorf("a large event: EventSize %d, encoded %d bytes", got, len(b))
	}
}
