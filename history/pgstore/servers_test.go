package pgstore

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

// TestServerRegistry: register, heartbeat, list, expire by the database's
// clock, remove.
func TestServerRegistry(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	if err := s.RegisterServer(bg, ServerInfo{ID: "b", Address: "10.0.0.2:7233", Version: "v1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterServer(bg, ServerInfo{ID: "a", Address: "10.0.0.1:7233", TTL: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	list := func() []ServerInfo {
		t.Helper()
		out, err := s.Servers(bg)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	until(t, "server a expires", func() bool { return !list()[0].Alive })
	got := list()
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" || !got[1].Alive || got[1].Address != "10.0.0.2:7233" || got[1].Version != "v1" {
		t.Fatalf("servers: %+v", got)
	}
	if !got[1].Expires.After(got[1].LastHeartbeat) || got[1].RegisteredAt.After(got[1].LastHeartbeat) {
		t.Fatalf("server b's times: %+v", got[1])
	}
	if err := s.HeartbeatServer(bg, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := list(); !got[0].Alive || !got[0].LastHeartbeat.After(got[0].RegisteredAt) {
		t.Fatalf("server a after its heartbeat: %+v", got[0])
	}
	if err := s.RemoveServer(bg, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveServer(bg, "a"); err != nil {
		t.Fatalf("removing a removed server: %v", err)
	}
	if err := s.HeartbeatServer(bg, "a", time.Minute); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("heartbeat of a removed server: %v, want ErrNotFound", err)
	}
	if got := list(); len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("servers after removing a: %+v", got)
	}
	if err := s.RegisterServer(bg, ServerInfo{}); !errors.Is(err, history.ErrInvalid) {
		t.Fatalf("register without an id: %v", err)
	}
}
