package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/internal/wire"
)

// TestMeasureSessionMemory is a measurement, not a test: with
// CAIRN_MEASURE=sessions it starts `cairn server`, opens 64 sessions that
// each announce a frame just under the body limit and send only its first
// bytes, and prints the server's resident memory and Go heap before and
// after (docs/performance.md, "Sessions under hostile load"). With
// CAIRN_MEASURE_SENT=N each session sends N bytes of its body before it
// stalls.
//
//	CAIRN_MEASURE=sessions go test ./test/e2e -run TestMeasureSessionMemory -v
func TestMeasureSessionMemory(t *testing.T) {
	if os.Getenv("CAIRN_MEASURE") != "sessions" {
		t.Skip("a measurement: set CAIRN_MEASURE=sessions")
	}
	srv := server(t, filepath.Join(t.TempDir(), "data"), "")
	addr, pid := srv.Addr, srv.Pid()
	settle := func() { time.Sleep(2 * time.Second) } // a measurement, not a test: let the server settle
	settle()
	rss0, heap0 := rssKiB(t, pid), heapBytes(t, addr)
	const conns = 64
	const announced = 4<<20 - 64 // just under the default 4 MiB body limit
	sent, _ := strconv.Atoi(os.Getenv("CAIRN_MEASURE_SENT"))
	var open []net.Conn
	for range conns {
		c := upgradeSession(t, addr)
		var h [9]byte
		binary.BigEndian.PutUint32(h[:4], announced+5)
		h[4] = byte(wire.KindCall)
		binary.BigEndian.PutUint32(h[5:], 1)
		if _, err := c.Write(append(h[:], []byte("\x0dStartWorkflow")...)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(make([]byte, sent)); err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	settle()
	rss1, heap1 := rssKiB(t, pid), heapBytes(t, addr)
	t.Logf("%d sessions announcing %d-byte frames, %d bytes sent: RSS %d → %d KiB (+%d), Go heap %d → %d KiB (+%d)",
		conns, announced, sent, rss0, rss1, rss1-rss0, heap0>>10, heap1>>10, (heap1-heap0)>>10)
	for _, c := range open {
		_ = c.Close()
	}
}

// upgradeSession opens a connection and upgrades it to a session.
func upgradeSession(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", wire.SessionPath, addr, wire.Protocol)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return c
}

func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// heapBytes reads the server's go_memstats_heap_alloc_bytes from /metrics.
func heapBytes(t *testing.T, addr string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "go_memstats_heap_alloc_bytes "); ok {
			f, _ := strconv.ParseFloat(rest, 64)
			return int64(f)
		}
	}
	t.Fatal("no go_memstats_heap_alloc_bytes")
	return 0
}
