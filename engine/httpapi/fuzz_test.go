package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/wire"
)

// routeNames lists the API methods in a fixed order.
func routeNames() []string {
	names := make([]string, 0, len(routes))
	for n := range routes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// FuzzHTTPBodies posts arbitrary bodies, as msgpack and as JSON, to every
// API method of a real handler (over a stub service): the server never
// panics, and answers 200 or a typed 4xx error body — never a 5xx for
// what a client sent.
func FuzzHTTPBodies(f *testing.F) {
	names := routeNames()
	for i := range names {
		f.Add(uint8(i), []byte(`{}`), true)
		f.Add(uint8(i), []byte{0x80}, false)
	}
	for _, r := range sampleRequests() {
		mp, _ := msgpack.Marshal(r)
		js, _ := json.Marshal(r)
		f.Add(uint8(0), mp, false)
		f.Add(uint8(1), js, true)
	}
	f.Add(uint8(2), []byte("\x81\xa8Commands\xdd\xff\xff\xff\xff"), false)
	f.Add(uint8(3), []byte(`{"WorkflowID":"x","Unknown":1}`), true)
	h := NewHandler(&stubService{}, Options{MaxBodyBytes: 64 << 10})
	f.Fuzz(func(t *testing.T, method uint8, body []byte, asJSON bool) {
		name := names[int(method)%len(names)]
		ct := ContentMsgpack
		if asJSON {
			ct = ContentJSON
		}
		req := httptest.NewRequest(http.MethodPost, Prefix+name, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			return
		}
		var eb api.ErrorBody
		if rec.Code >= 500 || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Code == "" {
			t.Fatalf("%s %q as %s: %d %s", name, body, ct, rec.Code, rec.Body)
		}
	})
}

// FuzzSessionFrames feeds arbitrary bytes to a session of a real handler
// (over a stub service) as a client's frames: the server never panics,
// answers only in well-formed frames, and ends the session when the
// bytes end.
func FuzzSessionFrames(f *testing.F) {
	call := func(id uint32, method string, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(5+1+len(method)+len(body)))
		b = append(b, byte(wire.KindCall))
		b = binary.BigEndian.AppendUint32(b, id)
		b = append(b, byte(len(method)))
		return append(append(b, method...), body...)
	}
	desc, _ := api.MarshalMsgpack(&api.DescribeWorkflowRequest{WorkflowID: "w"})
	f.Add(call(1, "DescribeWorkflow", desc))
	f.Add(append(call(1, "DescribeWorkflow", desc), call(2, "StartWorkflow", []byte{0x80})...))
	f.Add(call(7, "NoSuchMethod", nil))
	f.Add(append(call(3, "DescribeWorkflow", desc), []byte{0, 0, 0, 5, byte(wire.KindCancel), 0, 0, 0, 3}...))
	f.Add([]byte{0, 0, 0, 5, 9, 0, 0, 0, 1})             // an unknown kind
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 1}) // a frame over the limit
	f.Add(call(1, "DescribeWorkflow", desc)[:12])        // cut short
	h := NewHandler(&stubService{}, Options{MaxBodyBytes: 4 << 10, SessionFrameTimeout: time.Second, SessionIdleTimeout: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		s := &session{h: h, conn: server, w: wire.NewWriter(server), ctx: ctx, cancel: cancel, calls: map[uint32]context.CancelFunc{}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.serve(bufio.NewReader(server))
			_ = server.Close()
		}()
		_, _ = client.Write(data)
		_ = client.(*net.TCPConn).CloseWrite() // the client's bytes end here
		// What the server answers is well-formed frames, each a reply or a
		// failure, and then the end of the connection.
		_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
		rd := wire.NewReader(bufio.NewReader(client), 1<<20)
		for {
			fr, err := rd.Read()
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				break
			}
			if err != nil {
				t.Fatalf("the server's answer: %v", err)
			}
			if fr.Kind != wire.KindReply && fr.Kind != wire.KindFail {
				t.Fatalf("the server sent a frame of kind %d", fr.Kind)
			}
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the session did not end after its client's bytes did")
		}
	})
}
