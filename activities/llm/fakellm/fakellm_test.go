package fakellm

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// TestHeadOnlyCountsTurnsWithoutKeepingTheBody: a server that keeps only
// the head of each request still sees its turn (assistant messages
// counted across reads), its size and its settings.
func TestHeadOnlyCountsTurnsWithoutKeepingTheBody(t *testing.T) {
	var got []Request
	s := NewFunc(func(r Request) Reply { got = append(got, r); return Say("ok") }).HeadOnly().KeepTimings()
	hs := httptest.NewServer(s)
	defer hs.Close()
	var b strings.Builder
	b.WriteString(`{"model":"m1","stream":false,"messages":[{"role":"user","content":"hi"}`)
	for i := range 3000 {
		fmt.Fprintf(&b, `,{"role":"assistant","content":"answer %d"},{"role":"tool","content":"%s"}`, i, strings.Repeat("x", i%97))
	}
	b.WriteString(`]}`)
	body := b.String()
	// Odd-sized reads, so that matches straddle them.
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", iotest.HalfReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	if r.Turn != 3000 || r.Size != int64(len(body)) || r.Model != "m1" || r.Stream || len(r.Body) != headBytes ||
		!bytes.HasPrefix([]byte(body), r.Body) {
		t.Fatalf("turn %d size %d model %q stream %v head %d bytes", r.Turn, r.Size, r.Model, r.Stream, len(r.Body))
	}
	if ts := s.Timings(); len(ts) != 1 || ts[0].Size != int64(len(body)) || ts[0].Total < ts[0].Received {
		t.Fatalf("timings %+v", ts)
	}
}
