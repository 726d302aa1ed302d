package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w := NewWriter(a)
	go func() {
		_ = w.Send(KindCall, 1, "StartWorkflow", []byte{0x80})
		_ = w.Send(KindReply, 2, "", []byte("reply"))
		_ = w.Send(KindFail, 3, "", []byte(`{"code":"not_found"}`))
		_ = w.Send(KindCancel, 4, "", nil)
	}()
	r := NewReader(bufio.NewReader(b), 1<<20)
	want := []Frame{{KindCall, 1, "StartWorkflow", []byte{0x80}}, {KindReply, 2, "", []byte("reply")},
		{KindFail, 3, "", []byte(`{"code":"not_found"}`)}, {KindCancel, 4, "", []byte{}}}
	for _, wf := range want {
		f, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind != wf.Kind || f.ID != wf.ID || f.Method != wf.Method || !bytes.Equal(f.Body, wf.Body) {
			t.Fatalf("read %+v, want %+v", f, wf)
		}
	}
}

// TestConcurrentSendersCombine: frames sent from many goroutines arrive
// whole, each exactly once.
func TestConcurrentSendersCombine(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w := NewWriter(a)
	const senders, each = 16, 200
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := uint32(g*each + i)
				if err := w.Send(KindReply, id, "", []byte(fmt.Sprint("body-", id))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	r := NewReader(bufio.NewReader(b), 1<<20)
	seen := make(map[uint32]bool)
	for len(seen) < senders*each {
		f, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if seen[f.ID] || string(f.Body) != fmt.Sprint("body-", f.ID) {
			t.Fatalf("frame %d: duplicate or damaged body %q", f.ID, f.Body)
		}
		seen[f.ID] = true
	}
	wg.Wait()
}

func frame(kind Kind, id uint32, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(5+len(rest)))
	b = append(b, byte(kind))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, rest...)
}

func TestMalformedFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"truncated header", []byte{0, 0, 0}},
		{"length below the header", []byte{0, 0, 0, 2, 2, 0, 0, 0, 1}},
		{"unknown kind", frame(9, 1, nil)},
		{"kind zero", frame(0, 1, nil)},
		{"truncated body", frame(KindReply, 1, []byte("abc"))[:11]},
		{"call without a method", frame(KindCall, 1, nil)},
		{"call with a method longer than its frame", frame(KindCall, 1, []byte{5, 'a'})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bufio.NewReader(bytes.NewReader(tc.in)), 1<<20).Read()
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("Read: %v, want ErrProtocol", err)
			}
		})
	}
	if _, err := NewReader(bufio.NewReader(bytes.NewReader(nil)), 1).Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("empty stream: %v, want io.EOF", err)
	}
}

// TestTooLargeFrameIsSkipped: the reader reports the frame and stays in
// step with the stream.
func TestTooLargeFrameIsSkipped(t *testing.T) {
	in := append(frame(KindCall, 7, append([]byte{1, 'M'}, make([]byte, 100)...)), frame(KindReply, 8, []byte("ok"))...)
	r := NewReader(bufio.NewReader(bytes.NewReader(in)), 64)
	_, err := r.Read()
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.ID != 7 || tl.Kind != KindCall || tl.Limit != 64 {
		t.Fatalf("Read: %v, want a TooLargeError for call 7", err)
	}
	f, err := r.Read()
	if err != nil || f.ID != 8 || string(f.Body) != "ok" {
		t.Fatalf("next frame: %+v %v", f, err)
	}
}

// TestSendAfterFailure: once the connection failed, Send says so.
func TestSendAfterFailure(t *testing.T) {
	a, b := net.Pipe()
	_ = b.Close()
	w := NewWriter(a)
	if err := w.Send(KindReply, 1, "", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send on a closed pipe: %v, want ErrClosed", err)
	}
	if err := w.Send(KindReply, 2, "", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Send: %v, want ErrClosed", err)
	}
	w2 := NewWriter(a)
	w2.Fail(errors.New("gone"))
	if err := w2.Send(KindReply, 1, "", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Fail: %v", err)
	}
	if err := w2.Send(KindCall, 1, string(make([]byte, 300)), nil); !errors.Is(err, ErrProtocol) {
		t.Fatalf("method name of 300 bytes: %v, want ErrProtocol", err)
	}
}

// TestAnnouncedLengthIsNotAllocated: a frame's body is allocated as its
// bytes arrive. A peer announcing a frame just under the limit and sending
// a few bytes of it costs a few bytes, not the announced length.
func TestAnnouncedLengthIsNotAllocated(t *testing.T) {
	const announced = 4 << 20
	head := frame(KindCall, 1, nil)[:headerLen]
	binary.BigEndian.PutUint32(head, announced)
	in := append(append([]byte{}, head...), "\x0dStartWorkflow"...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const frames = 16
	for range frames {
		_, err := NewReader(bufio.NewReader(bytes.NewReader(in)), announced).Read()
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("truncated frame: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / frames; per > 256<<10 {
		t.Fatalf("%d bytes allocated per truncated frame announcing %d", per, announced)
	}
	// A whole large frame still reads back exactly.
	body := bytes.Repeat([]byte("x"), 3<<20+17)
	f, err := NewReader(bufio.NewReader(bytes.NewReader(frame(KindReply, 9, body))), announced).Read()
	if err != nil || !bytes.Equal(f.Body, body) || f.ID != 9 {
		t.Fatalf("large frame: %v (%d bytes)", err, len(f.Body))
	}
}
