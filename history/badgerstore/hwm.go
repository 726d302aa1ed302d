package badgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// HWMFile is the name of the store's integrity file in the data directory.
// It lives outside the logs it protects (see docs/reliability.md, "Storage
// integrity"): the number of the last commit known durable, and how many
// bytes of Badger's MANIFEST were synced.
const HWMFile = "CAIRN-HWM"

// The file holds two slots, each in its own 512-byte sector; a commit
// writes the slot of its sequence number's parity, so damage to one slot
// costs at most the last commit's protection:
//
//	"CAIRNHWM"(8) | seq u64 | manifest i64 | crc32c u32 (of the 24 bytes before)
const (
	hwmSlotSize = 512
	hwmRecLen   = 8 + 8 + 8 + 4
	// hwmSyncEvery bounds how long the mark may lag on disk behind the
	// page cache (what a power loss, not a process crash, can take back).
	hwmSyncEvery = time.Second
)

var hwmMagic = []byte("CAIRNHWM")

// hwmFile is the open integrity file. Commits advance it without fsync (a
// write into the page cache, which a process crash keeps); a background
// goroutine syncs it at least every hwmSyncEvery; manifest changes sync it
// at once.
type hwmFile struct {
	mu       sync.Mutex
	f        *os.File
	mapped   []byte // the file's two slots mapped shared (nil: written with WriteAt)
	path     string
	seq      uint64
	manifest int64
	dirty    bool
	err      error // first write error; the mark then stops moving
	stop     chan struct{}
	done     chan struct{}
}

// hwmState is what openHWM read.
type hwmState struct {
	existed  bool
	seq      uint64
	manifest int64
}

// openHWM opens (creating if needed) the integrity file of dir. A file that
// exists but has no valid slot is damage.
func openHWM(dir string) (*hwmFile, hwmState, error) {
	path := filepath.Join(dir, HWMFile)
	var st hwmState
	f, err := os.OpenFile(path, os.O_RDWR, 0o644)
	switch {
	case err == nil:
		st.existed = true
	case errors.Is(err, fs.ErrNotExist):
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, st, fmt.Errorf("badgerstore: create %s: %w", path, err)
		}
	default:
		return nil, st, fmt.Errorf("badgerstore: open %s: %w", path, err)
	}
	h := &hwmFile{f: f, path: path, stop: make(chan struct{}), done: make(chan struct{})}

	if st.existed {
		buf := make([]byte, 2*hwmSlotSize)
		n, err := f.ReadAt(buf, 0)
		if err != nil && n == 0 && !errors.Is(err, os.ErrClosed) {
			buf = buf[:0]
		}
		buf = buf[:n]
		valid := false
		for slot := range 2 {
			seq, manifest, ok := decodeHWMSlot(buf, slot)
			if ok && (!valid || seq > st.seq) {
				st.seq, st.manifest, valid = seq, manifest, true
			}
		}
		if !valid && !allZero(buf) {
			_ = f.Close()
			return nil, st, corruptFile(path, 0, "neither slot of the integrity file is valid")
		}
		if !valid {
			// Created (and allocated) but never written. Open then
			// refuses it if the database holds commits.
			st.existed = false
		}
	}
	h.seq, h.manifest = st.seq, st.manifest
	// A commit then stores its number into the page cache with no system
	// call; a crash of the process keeps it as a write would. The blocks
	// are allocated first, so the store cannot fault on a full disk.
	h.mapped = mapHWM(f)
	go h.syncLoop()
	return h, st, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func decodeHWMSlot(buf []byte, slot int) (seq uint64, manifest int64, ok bool) {
	off := slot * hwmSlotSize
	if len(buf) < off+hwmRecLen {
		return 0, 0, false
	}
	r := buf[off : off+hwmRecLen]
	if !bytes.Equal(r[:8], hwmMagic) || crc32.Checksum(r[:24], castagnoli) != binary.BigEndian.Uint32(r[24:]) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(r[8:]), int64(binary.BigEndian.Uint64(r[16:])), true
}

// putHWMSlot encodes a slot into r (at least hwmRecLen bytes).
func putHWMSlot(r []byte, seq uint64, manifest int64) {
	copy(r, hwmMagic)
	binary.BigEndian.PutUint64(r[8:], seq)
	binary.BigEndian.PutUint64(r[16:], uint64(manifest))
	binary.BigEndian.PutUint32(r[24:], crc32.Checksum(r[:24], castagnoli))
}

// writeSlot writes one slot; h.mu is held.
func (h *hwmFile) writeSlot(slot int) error {
	if h.mapped != nil {
		putHWMSlot(h.mapped[slot*hwmSlotSize:], h.seq, h.manifest)
		h.dirty = true
		return nil
	}
	var rec [hwmRecLen]byte
	putHWMSlot(rec[:], h.seq, h.manifest)
	if _, err := h.f.WriteAt(rec[:], int64(slot*hwmSlotSize)); err != nil {
		return fmt.Errorf("badgerstore: write %s: %w", h.path, err)
	}
	h.dirty = true
	return nil
}

// advance records that commit seq is durable. It does not sync: a crash of
// the process keeps the write; syncLoop bounds what a power loss can undo.
func (h *hwmFile) advance(seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil || seq <= h.seq {
		return
	}
	h.seq = seq
	if err := h.writeSlot(int(seq % 2)); err != nil {
		h.err = err
	}
}

// setManifest records the MANIFEST's synced size (0: being rewritten, no
// expectation) in both slots, and syncs.
func (h *hwmFile) setManifest(size int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.manifest = size
	for slot := range 2 {
		if err := h.writeSlot(slot); err != nil {
			return err
		}
	}
	return h.syncLocked()
}

// reset sets the mark to seq (after an accepted data loss) and syncs.
func (h *hwmFile) reset(seq uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq, h.err = seq, nil
	for slot := range 2 {
		if err := h.writeSlot(slot); err != nil {
			return err
		}
	}
	return h.syncLocked()
}

func (h *hwmFile) syncLocked() error {
	if !h.dirty {
		return nil
	}
	if err := syncHWM(h); err != nil {
		return fmt.Errorf("badgerstore: sync %s: %w", h.path, err)
	}
	h.dirty = false
	return nil
}

func (h *hwmFile) syncLoop() {
	defer close(h.done)
	t := time.NewTicker(hwmSyncEvery)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.mu.Lock()
			_ = h.syncLocked()
			h.mu.Unlock()
		}
	}
}

// close syncs and closes the file.
func (h *hwmFile) close() error {
	close(h.stop)
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.syncLocked()
	unmapHWM(h)
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	return err
}
