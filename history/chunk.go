package history

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Content-addressed payload chunks.
//
// A payload may be stored by reference: Payload.Ref names a chunk in
// SpaceChunk instead of carrying its bytes. A chunk holds some bytes and,
// optionally, the hash of a parent chunk whose bytes come first, so a chain
// of chunks spells one byte string — the parent's bytes, then the child's.
// An agent's transcript grows that way: each model call adds one chunk
// (the new messages) on top of the chunk that spelled the transcript so
// far, so an N-turn conversation stores O(N) bytes however long it gets,
// and every turn's input in history is one 32-byte reference.
//
// A chunk's key is the SHA-256 of its parent and its bytes (ChunkHash), so
// equal content is stored once, shared by turns, runs and workflows, and a
// damaged chunk is detected when it is read (DecodeChunk checks the hash).
// Chunks are written in the same transaction as the first event that
// references them and are never deleted while a run that references them
// exists (nothing deletes runs today; a retention sweep must mark the
// chunks the remaining events reach before deleting any).

// HashSize is the length of a chunk hash.
const HashSize = sha256.Size

// ErrChunkNotFound is returned (wrapped) when a payload references a chunk
// that is not stored: a payload naming an unknown parent, or an exported
// history without its chunks.
var ErrChunkNotFound = errors.New("history: chunk not found")

// Chunk is one content-addressed piece of payload bytes: Parent (nil, or
// the hash of the chunk whose bytes come first) followed by Data.
type Chunk struct {
	Parent []byte `msgpack:"p,omitempty" json:"parent,omitempty"`
	Data   []byte `msgpack:"d,omitempty" json:"data,omitempty"`
}

// chunkVersion is the first byte of an encoded chunk.
const chunkVersion = 1

// ChunkHash returns the key of the chunk (parent, data): SHA-256 over a
// version byte, the parent's length and bytes, and the data.
func ChunkHash(parent, data []byte) []byte {
	h := sha256.New()
	h.Write([]byte{chunkVersion, byte(len(parent))})
	h.Write(parent)
	h.Write(data)
	return h.Sum(nil)
}

// RootRef is the reference of the empty chunk, the root every chunk chain
// may start from: it is never stored and always exists. A payload that
// starts a chain to be extended later (an agent's first model call) is
// Payload{Ref: RootRef, Data: first bytes}, so that its bytes become a
// chunk however small they are.
var RootRef = ChunkHash(nil, nil)

// IsRoot reports whether h is RootRef.
func IsRoot(h []byte) bool { return bytes.Equal(h, RootRef) }

// Hash returns the chunk's key.
func (c Chunk) Hash() []byte { return ChunkHash(c.Parent, c.Data) }

// EncodeChunk returns the stored form of c: version(1) len(parent)(1)
// parent data. The key it is stored under (its hash) is its checksum.
func EncodeChunk(c Chunk) []byte {
	b := make([]byte, 0, 2+len(c.Parent)+len(c.Data))
	b = append(b, chunkVersion, byte(len(c.Parent)))
	b = append(b, c.Parent...)
	return append(b, c.Data...)
}

// DecodeChunk decodes a stored chunk and checks it against its key. A
// record that is malformed or does not hash to key returns an error
// wrapping ErrCorrupt. The chunk's slices alias value.
func DecodeChunk(key, value []byte) (Chunk, error) {
	corrupt := func(why string) (Chunk, error) {
		return Chunk{}, fmt.Errorf("%w: chunk %s: %s", ErrCorrupt, shortHash(key), why)
	}
	if len(value) < 2 || value[0] != chunkVersion {
		return corrupt("bad header")
	}
	n := int(value[1])
	if n != 0 && n != HashSize || len(value) < 2+n {
		return corrupt("bad parent length")
	}
	c := Chunk{Data: value[2+n:]}
	if n > 0 {
		c.Parent = value[2 : 2+n]
	}
	if !bytes.Equal(c.Hash(), key) {
		return corrupt("content does not match its hash")
	}
	return c, nil
}

func shortHash(h []byte) string {
	s := hex.EncodeToString(h)
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// ByRef reports whether the payload references a chunk.
func (p Payload) ByRef() bool { return len(p.Ref) > 0 }

// StoredRef returns the reference under which the payload's bytes are (or
// would be) stored: Ref when the payload carries no bytes of its own, else
// the hash of the chunk (Ref, Data). A payload that extends a chunk (Ref
// and Data) is stored as that new chunk.
func (p Payload) StoredRef() []byte {
	if len(p.Ref) > 0 && len(p.Data) == 0 {
		return p.Ref
	}
	return ChunkHash(p.Ref, p.Data)
}

// SamePayload reports whether a and b hold the same value: the same
// encoding and, when either is by reference, the same stored reference
// (which names the bytes and how they are split into chunks), else the same
// bytes. A payload stored by the engine by reference compares equal to the
// inline payload it was made from.
func SamePayload(a, b Payload) bool {
	if a.Encoding != b.Encoding {
		return false
	}
	if !a.ByRef() && !b.ByRef() {
		return bytes.Equal(a.Data, b.Data)
	}
	return bytes.Equal(a.StoredRef(), b.StoredRef())
}

// ChunkSource returns stored chunks by hash.
type ChunkSource interface {
	// Chunk returns the chunk stored under hash, or an error wrapping
	// ErrChunkNotFound (or ErrCorrupt).
	Chunk(ctx context.Context, hash []byte) (Chunk, error)
}

// MaxChunkChain bounds the chunks one payload may chain (a guard against a
// malformed store, far above any transcript).
const MaxChunkChain = 1 << 20

// ResolveBytes returns the bytes a payload stands for: the bytes of the
// chain its Ref names, followed by its Data.
func ResolveBytes(ctx context.Context, src ChunkSource, p Payload) ([]byte, error) {
	if !p.ByRef() {
		return p.Data, nil
	}
	var parts [][]byte
	total := len(p.Data)
	for h := p.Ref; len(h) > 0 && !IsRoot(h); {
		if len(parts) >= MaxChunkChain {
			return nil, fmt.Errorf("%w: chunk chain from %s is longer than %d", ErrCorrupt, shortHash(p.Ref), MaxChunkChain)
		}
		c, err := src.Chunk(ctx, h)
		if err != nil {
			return nil, err
		}
		parts = append(parts, c.Data)
		total += len(c.Data)
		h = c.Parent
	}
	out := make([]byte, 0, total)
	for i := len(parts) - 1; i >= 0; i-- {
		out = append(out, parts[i]...)
	}
	return append(out, p.Data...), nil
}

// Resolve returns p with its bytes inline (Ref cleared).
func Resolve(ctx context.Context, src ChunkSource, p Payload) (Payload, error) {
	if !p.ByRef() {
		return p, nil
	}
	b, err := ResolveBytes(ctx, src, p)
	if err != nil {
		return Payload{}, err
	}
	return Payload{Encoding: p.Encoding, Data: b}, nil
}

// MemChunks is a ChunkSource in memory, keyed by hex hash (the form an
// exported history carries its chunks in).
type MemChunks map[string]Chunk

// Chunk implements ChunkSource, checking the chunk against its hash.
func (m MemChunks) Chunk(_ context.Context, hash []byte) (Chunk, error) {
	if IsRoot(hash) {
		return Chunk{}, nil
	}
	c, ok := m[hex.EncodeToString(hash)]
	if !ok {
		return Chunk{}, fmt.Errorf("%w: %s", ErrChunkNotFound, shortHash(hash))
	}
	if !bytes.Equal(c.Hash(), hash) {
		return Chunk{}, fmt.Errorf("%w: chunk %s: content does not match its hash", ErrCorrupt, shortHash(hash))
	}
	return c, nil
}

// Add stores c under its hash and returns the hash.
func (m MemChunks) Add(c Chunk) []byte {
	h := c.Hash()
	m[hex.EncodeToString(h)] = c
	return h
}

// VisitPayloads calls fn with a pointer to every payload an event's
// attributes hold (nested ones included: a failure's details), in field
// order. It is driven by the same field lists as the codec, so no payload
// field is ever missed.
func VisitPayloads(a Attributes, fn func(name string, p *Payload)) {
	if f, ok := a.(fielder); ok {
		f.fields(payloadVisitor{fn: fn})
	}
}

type payloadVisitor struct {
	prefix string
	fn     func(string, *Payload)
}

func (payloadVisitor) str(string, *string)                  {}
func (payloadVisitor) boolean(string, *bool)                {}
func (payloadVisitor) int64(string, *int64)                 {}
func (payloadVisitor) int32(string, *int32)                 {}
func (payloadVisitor) duration(string, *time.Duration)      {}
func (payloadVisitor) float64(string, *float64)             {}
func (payloadVisitor) strings(string, *[]string)            {}
func (payloadVisitor) time(string, *time.Time)              {}
func (payloadVisitor) enum(string, *uint8, []string)        {}
func (payloadVisitor) retryPolicyPtr(string, **RetryPolicy) {}
func (v payloadVisitor) payload(name string, p *Payload)    { v.fn(v.prefix+name, p) }
func (v payloadVisitor) object(name string, p fielder) {
	p.fields(payloadVisitor{prefix: v.prefix + name + ".", fn: v.fn})
}
func (v payloadVisitor) failurePtr(name string, p **Failure) {
	if *p != nil {
		v.object(name, *p)
	}
}

// CloneEvent returns a deep copy of ev (through its encoding).
func CloneEvent(ev Event) (Event, error) {
	b, err := EncodeEvent(ev)
	if err != nil {
		return Event{}, err
	}
	return DecodeEvent(b, RunRef{WorkflowID: "clone", RunID: "clone"}, ev.ID)
}

// CollectChunks returns every chunk the events' payloads reference, with
// their ancestors, read from src: what a self-contained export carries.
func CollectChunks(ctx context.Context, src ChunkSource, events []Event) (MemChunks, error) {
	out := MemChunks{}
	var err error
	for i := range events {
		VisitPayloads(events[i].Attrs, func(_ string, p *Payload) {
			for h := p.Ref; err == nil && len(h) > 0 && !IsRoot(h); {
				k := hex.EncodeToString(h)
				if _, done := out[k]; done {
					return
				}
				var c Chunk
				if c, err = src.Chunk(ctx, h); err == nil {
					out[k] = c
					h = c.Parent
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("history: collect chunks of event %d: %w", events[i].ID, err)
		}
	}
	return out, nil
}
