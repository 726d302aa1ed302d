package badgerstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/third_party/badger/pb"
)

// Backups.
//
// Store.Backup writes a consistent copy of the whole store — every record,
// every event, the commit sequence — as it stood at one read timestamp,
// while the store goes on serving. Restore loads such a file into a new
// directory and opens it (with every integrity check of Open) before it
// moves it into place; a file that was damaged or cut short is refused.
//
// The file:
//
//	"CAIRNBK1"                       magic and format version
//	{ u32 n > 0 | n bytes }          frames of Badger's backup stream (length-prefixed KVLists)
//	u32 0                            end of frames
//	u64 keys | u64 events | u64 last group commit | u64 read version | i64 unix nanos
//	32 bytes                         SHA-256 of everything before it
//
// All integers are big-endian. The copy is what the store held at its read
// timestamp: like a crash at that instant, it keeps everything committed
// before it and nothing after.

var backupMagic = []byte("CAIRNBK1")

// backupFrame bounds one frame of the file.
const backupFrame = 1 << 20

// BackupInfo describes a backup file.
type BackupInfo struct {
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// Keys counts the key versions in it; Events those that are events.
	Keys   int64 `json:"keys"`
	Events int64 `json:"events"`
	// Seq is the last group commit the copy holds.
	Seq uint64 `json:"seq"`
	// ReadVersion is Badger's version of the newest key in the copy.
	ReadVersion uint64 `json:"readVersion"`
	// Created is when the backup was taken.
	Created time.Time `json:"created"`
	// SHA256 is the file's checksum (hex), as stored in its trailer.
	SHA256 string `json:"sha256"`
}

// ErrBackup is wrapped by the errors of a backup file that cannot be
// restored: not a backup, another format, damaged or cut short. A damaged
// file also matches history.ErrCorrupt.
var ErrBackup = errors.New("badgerstore: bad backup file")

// Backup writes a consistent copy of the store to w (the format above) and
// describes it. It reads one snapshot: commits made while it runs are not
// in the copy and are not held up. A context that ends stops it with
// ctx.Err(); w then holds an incomplete file, which Restore refuses.
func (s *Store) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	if err := s.gate.enter(); err != nil {
		return BackupInfo{}, err
	}
	defer s.gate.exit()
	bw := newBackupWriter(ctx, w)
	if _, err := bw.out.Write(backupMagic); err != nil {
		return BackupInfo{}, err
	}
	stream := s.db.NewStream()
	stream.LogPrefix = "badgerstore.Backup"
	// One producer: one read transaction, so one snapshot. (Badger's
	// producers each open their own transaction, each at the time it
	// starts: with several, a commit landing between them would be in one
	// part of the copy and not in another.)
	stream.NumGo = 1
	version, err := stream.Backup(bw, 0)
	if err == nil {
		err = bw.err
	}
	if err != nil {
		if ctx.Err() != nil {
			return BackupInfo{}, ctx.Err()
		}
		return BackupInfo{}, fmt.Errorf("badgerstore: backup: %w", readError("backup", err))
	}
	return bw.finish(version)
}

// backupWriter frames Badger's backup stream, hashes the file and counts
// what the stream holds (it decodes each KVList as it passes).
type backupWriter struct {
	ctx   context.Context
	raw   io.Writer // w, counted
	out   io.Writer // raw, hashed
	sum   hash.Hash
	n     int64
	info  BackupInfo
	buf   []byte // stream bytes not yet framed
	parse []byte // stream bytes not yet decoded
	err   error
}

func newBackupWriter(ctx context.Context, w io.Writer) *backupWriter {
	bw := &backupWriter{ctx: ctx, sum: sha256.New(), info: BackupInfo{Created: time.Now().UTC()}}
	bw.raw = &countWriter{w: w, n: &bw.n}
	bw.out = io.MultiWriter(bw.raw, bw.sum)
	return bw
}

type countWriter struct {
	w io.Writer
	n *int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}

// Write takes bytes of Badger's backup stream.
func (bw *backupWriter) Write(p []byte) (int, error) {
	if bw.err != nil {
		return 0, bw.err
	}
	if err := bw.ctx.Err(); err != nil {
		bw.err = err
		return 0, err
	}
	bw.parse = append(bw.parse, p...)
	if err := bw.count(); err != nil {
		bw.err = err
		return 0, err
	}
	bw.buf = append(bw.buf, p...)
	for len(bw.buf) >= backupFrame {
		if err := bw.frame(bw.buf[:backupFrame]); err != nil {
			return 0, err
		}
		bw.buf = bw.buf[backupFrame:]
	}
	return len(p), nil
}

func (bw *backupWriter) frame(b []byte) error {
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], uint32(len(b)))
	if _, err := bw.out.Write(h[:]); err != nil {
		bw.err = err
		return err
	}
	if _, err := bw.out.Write(b); err != nil {
		bw.err = err
		return err
	}
	return nil
}

// count decodes the complete KVLists at the front of bw.parse.
func (bw *backupWriter) count() error {
	for len(bw.parse) >= 8 {
		sz := binary.LittleEndian.Uint64(bw.parse)
		if uint64(len(bw.parse)-8) < sz {
			return nil
		}
		var list pb.KVList
		if err := proto.Unmarshal(bw.parse[8:8+sz], &list); err != nil {
			return fmt.Errorf("badgerstore: backup: decode the stream: %w", err)
		}
		for _, kv := range list.Kv {
			bw.info.Keys++
			switch {
			case len(kv.Key) > 0 && kv.Key[0] == prefixEvent:
				bw.info.Events++
			case bytes.Equal(kv.Key, seqKey) && len(kv.Meta) > 0 && kv.Meta[0]&bitDeleteMeta == 0:
				if v, err := unseal(seqKey, kv.Value); err == nil && len(v) == 8 {
					bw.info.Seq = max(bw.info.Seq, binary.BigEndian.Uint64(v))
				}
			}
		}
		bw.parse = bw.parse[8+sz:]
	}
	return nil
}

// bitDeleteMeta is Badger's delete marker in a KV's meta byte.
const bitDeleteMeta = 1 << 0

// finish writes the last frame and the trailer.
func (bw *backupWriter) finish(version uint64) (BackupInfo, error) {
	if len(bw.buf) > 0 {
		if err := bw.frame(bw.buf); err != nil {
			return BackupInfo{}, err
		}
	}
	if len(bw.parse) != 0 {
		return BackupInfo{}, fmt.Errorf("badgerstore: backup: the stream ended inside a record")
	}
	bw.info.ReadVersion = version
	var t [4 + 5*8]byte
	binary.BigEndian.PutUint64(t[4:], uint64(bw.info.Keys))
	binary.BigEndian.PutUint64(t[12:], uint64(bw.info.Events))
	binary.BigEndian.PutUint64(t[20:], bw.info.Seq)
	binary.BigEndian.PutUint64(t[28:], bw.info.ReadVersion)
	binary.BigEndian.PutUint64(t[36:], uint64(bw.info.Created.UnixNano()))
	if _, err := bw.out.Write(t[:]); err != nil {
		return BackupInfo{}, err
	}
	sum := bw.sum.Sum(nil)
	if _, err := bw.raw.Write(sum); err != nil { // the checksum is not hashed
		return BackupInfo{}, err
	}
	bw.info.Bytes, bw.info.SHA256 = bw.n, hex.EncodeToString(sum)
	return bw.info, nil
}

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// Store configures the stores Restore opens (Dir is set by Restore).
	Store Options
}

// Restore loads the backup read from r into dir, which must not exist or
// be empty. It loads into a new directory beside dir, checks the file's
// trailer and checksum, opens the result with every integrity check of
// Open, and only then moves it to dir; on any failure dir is left as it
// was. A damaged or incomplete file returns an error wrapping ErrBackup
// (and history.ErrCorrupt for damage).
//
// The restored store carries a doubt mark (history.DoubtMark): effects
// performed after the backup's moment are not in its ledger, so the engine
// that opens it first puts the SideEffect actions of the runs open then in
// doubt instead of dispatching them again.
func Restore(ctx context.Context, dir string, r io.Reader, opts RestoreOptions) (BackupInfo, error) {
	if err := emptyDir(dir); err != nil {
		return BackupInfo{}, err
	}
	tmp, err := tempSibling(dir)
	if err != nil {
		return BackupInfo{}, err
	}
	defer os.RemoveAll(tmp) // after a successful rename nothing is left here
	info, err := load(ctx, tmp, r, opts.Store)
	if err != nil {
		return BackupInfo{}, err
	}
	so := opts.Store
	so.Dir = tmp
	st, err := Open(so) // every integrity check, on the restored copy
	if err != nil {
		return BackupInfo{}, fmt.Errorf("badgerstore: restore: the restored copy does not open: %w", err)
	}
	if err := history.MarkInDoubt(ctx, st, restoreMark(info, time.Now().UTC())); err != nil {
		_ = st.Close()
		return BackupInfo{}, fmt.Errorf("badgerstore: restore: %w", err)
	}
	if err := st.Close(); err != nil {
		return BackupInfo{}, fmt.Errorf("badgerstore: restore: %w", err)
	}
	_ = os.Remove(dir) // empty (checked): rename needs it gone on some systems
	if err := os.Rename(tmp, dir); err != nil {
		return BackupInfo{}, fmt.Errorf("badgerstore: restore: move the restored copy into place: %w", err)
	}
	return info, nil
}

// restoreMark is the doubt mark a restore leaves: whatever was performed
// after the backup's moment is not in its effects ledger, so the engine
// puts the actions that were scheduled or in flight then in doubt when it
// opens (history.DoubtMark).
func restoreMark(info BackupInfo, now time.Time) history.DoubtMark {
	return history.DoubtMark{At: now, Source: history.DoubtRestore,
		Reason: fmt.Sprintf("restored from the backup taken at %s (up to group commit %d)", info.Created.Format(time.RFC3339), info.Seq),
		Lost:   "everything committed after the backup was taken"}
}

// load reads the backup into a fresh store at dir.
func load(ctx context.Context, dir string, r io.Reader, opts Options) (BackupInfo, error) {
	opts.Dir = dir
	st, err := Open(opts)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("badgerstore: restore: %w", err)
	}
	br := &backupReader{ctx: ctx, r: bufio.NewReaderSize(r, 1<<16), sum: sha256.New()}
	err = br.header()
	if err == nil {
		err = st.db.Load(br, 16)
		switch {
		case br.err != nil:
			err = br.err
		case err != nil && ctx.Err() == nil:
			err = br.fail("Badger's stream does not decode at byte %d: %v", br.n, err)
		}
	}
	var info BackupInfo
	if err == nil {
		info, err = br.trailer()
	}
	if cerr := st.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("badgerstore: restore: %w", cerr)
	}
	return info, err
}

// backupReader unframes a backup file for Badger's Load, hashing it; it
// returns io.EOF at the end frame.
type backupReader struct {
	ctx  context.Context
	r    *bufio.Reader
	sum  hash.Hash
	n    int64
	left int // bytes left in the current frame
	done bool
	err  error
}

func (br *backupReader) fail(format string, args ...any) error {
	if br.err == nil {
		br.err = fmt.Errorf("%w: %w: %s", ErrBackup, history.ErrCorrupt, fmt.Sprintf(format, args...))
	}
	return br.err
}

func (br *backupReader) readFull(b []byte) error {
	if _, err := io.ReadFull(br.r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return br.fail("the file ends at byte %d, before its end (an incomplete backup)", br.n)
		}
		br.err = err
		return err
	}
	br.sum.Write(b)
	br.n += int64(len(b))
	return nil
}

func (br *backupReader) header() error {
	m := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br.r, m); err != nil || !bytes.Equal(m, backupMagic) {
		return fmt.Errorf("%w: not a Cairn backup file (or another format)", ErrBackup)
	}
	br.sum.Write(m)
	br.n += int64(len(m))
	return nil
}

// Read implements io.Reader over the frames' contents.
func (br *backupReader) Read(p []byte) (int, error) {
	if br.err != nil {
		return 0, br.err
	}
	if err := br.ctx.Err(); err != nil {
		br.err = err
		return 0, err
	}
	for br.left == 0 {
		if br.done {
			return 0, io.EOF
		}
		var h [4]byte
		if err := br.readFull(h[:]); err != nil {
			return 0, err
		}
		br.left = int(binary.BigEndian.Uint32(h[:]))
		if br.left == 0 {
			br.done = true
			return 0, io.EOF
		}
		if br.left > backupFrame {
			return 0, br.fail("frame of %d bytes at byte %d", br.left, br.n-4)
		}
	}
	p = p[:min(len(p), br.left)]
	if err := br.readFull(p); err != nil {
		return 0, err
	}
	br.left -= len(p)
	return len(p), nil
}

// trailer checks the file's end: the counts and the checksum.
func (br *backupReader) trailer() (BackupInfo, error) {
	if !br.done {
		return BackupInfo{}, br.fail("Badger's stream ended before the file's end frame")
	}
	var t [5 * 8]byte
	if err := br.readFull(t[:]); err != nil {
		return BackupInfo{}, err
	}
	want := br.sum.Sum(nil)
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(br.r, got); err != nil {
		return BackupInfo{}, br.fail("the file ends inside its checksum (an incomplete backup)")
	}
	if !bytes.Equal(got, want) {
		return BackupInfo{}, br.fail("checksum mismatch: the file is damaged (stored %x, computed %x)", got, want)
	}
	if _, err := br.r.ReadByte(); err == nil {
		return BackupInfo{}, br.fail("bytes after the checksum")
	}
	return BackupInfo{
		Bytes: br.n + sha256.Size, Keys: int64(binary.BigEndian.Uint64(t[0:])), Events: int64(binary.BigEndian.Uint64(t[8:])),
		Seq: binary.BigEndian.Uint64(t[16:]), ReadVersion: binary.BigEndian.Uint64(t[24:]),
		Created: time.Unix(0, int64(binary.BigEndian.Uint64(t[32:]))).UTC(), SHA256: hex.EncodeToString(got),
	}, nil
}

// emptyDir checks that dir does not exist or is an empty directory.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("badgerstore: restore into %q: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%w: badgerstore: restore into %q: the directory is not empty (restore into a new one)", ErrInvalidOptions, dir)
	}
	return nil
}

// tempSibling makes a new directory beside dir.
func tempSibling(dir string) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(filepath.Dir(filepath.Clean(dir)), "."+filepath.Base(dir)+".restore-"+hex.EncodeToString(b[:]))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("badgerstore: restore: %w", err)
	}
	return tmp, nil
}

// VerifyBackup reads a backup file to its end and checks its frames, its
// trailer and its checksum without loading it (`cairn backup` runs it on
// the copy as it arrives).
func VerifyBackup(r io.Reader) (BackupInfo, error) {
	br := &backupReader{ctx: context.Background(), r: bufio.NewReaderSize(r, 1<<16), sum: sha256.New()}
	if err := br.header(); err != nil {
		return BackupInfo{}, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return BackupInfo{}, err
	}
	return br.trailer()
}
