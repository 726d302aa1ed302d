package client

import (
	"context"
	"fmt"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// ChunkCache reads payload chunks from a service and keeps the most
// recently used ones in memory, up to a byte budget. Chunks are immutable
// (their hash is their name), so a cached chunk never goes stale: a worker
// that follows a growing transcript fetches each turn's new chunk once.
// It implements history.ChunkSource and is safe for concurrent use.
type ChunkCache struct {
	svc      api.Service
	maxBytes int

	mu    sync.Mutex
	lru   *lru.Cache[string, history.Chunk]
	bytes int
	// walking is the parent of the last chunk fetched: asking for it next
	// means a caller walks a chain it does not hold, so the rest of the
	// chain comes in one answer.
	walking string
}

// DefaultChunkCacheBytes is the budget NewChunkCache uses for maxBytes ≤ 0.
const DefaultChunkCacheBytes = 64 << 20

// NewChunkCache returns a cache over svc holding up to maxBytes of chunk
// data (≤ 0: DefaultChunkCacheBytes).
func NewChunkCache(svc api.Service, maxBytes int) *ChunkCache {
	if maxBytes <= 0 {
		maxBytes = DefaultChunkCacheBytes
	}
	c := &ChunkCache{svc: svc, maxBytes: maxBytes}
	c.lru, _ = lru.NewWithEvict[string, history.Chunk](1<<20, func(_ string, ch history.Chunk) { c.bytes -= len(ch.Data) + len(ch.Parent) })
	return c
}

// Chunk implements history.ChunkSource: from memory, else from the
// service. A chunk is fetched alone — a transcript's new turn extends a
// chain the cache holds — unless the caller is walking a chain it does not
// hold (it asks for the parent of the chunk it just fetched): then the
// chunk's ancestors come in the same answer.
func (c *ChunkCache) Chunk(ctx context.Context, hash []byte) (history.Chunk, error) {
	if history.IsRoot(hash) {
		return history.Chunk{}, nil
	}
	if ch, ok := c.get(hash); ok {
		return ch, nil
	}
	c.mu.Lock()
	ancestors := c.walking == string(hash)
	c.mu.Unlock()
	resp, err := c.svc.GetChunks(ctx, &api.GetChunksRequest{Hashes: [][]byte{hash}, Ancestors: ancestors})
	if err != nil {
		return history.Chunk{}, fmt.Errorf("%w: %x: %w", history.ErrChunkNotFound, hash, err)
	}
	var found *history.Chunk
	for i := range resp.Chunks {
		ch := resp.Chunks[i]
		h := ch.Hash()
		c.put(h, ch)
		if string(h) == string(hash) {
			found = &resp.Chunks[i]
		}
	}
	if found == nil {
		return history.Chunk{}, fmt.Errorf("%w: the service did not return chunk %x", history.ErrCorrupt, hash)
	}
	c.mu.Lock()
	c.walking = string(found.Parent)
	c.mu.Unlock()
	return *found, nil
}

func (c *ChunkCache) get(hash []byte) (history.Chunk, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(string(hash))
}

func (c *ChunkCache) put(hash []byte, ch history.Chunk) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(string(hash)) {
		return
	}
	c.lru.Add(string(hash), ch)
	c.bytes += len(ch.Data) + len(ch.Parent)
	for c.bytes > c.maxBytes && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}
