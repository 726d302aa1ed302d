package storecopy

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cairnflow/cairn/history"
)

// Pages of a Scan: about pageBytes of records, between minPage and
// maxPage records.
const (
	pageBytes = 4 << 20
	minPage   = 16
	maxPage   = 1024
	firstPage = 256
)

// pager walks every record of one space of a store in key order, a page
// at a time, leaving out the copy's own markers. A nil store has no
// records.
type pager struct {
	st    history.Store
	space history.Space
	after []byte
	buf   []history.Record
	limit int
	done  bool
}

func newPager(st history.Store, sp history.Space) *pager {
	return &pager{st: st, space: sp, limit: firstPage, done: st == nil}
}

// peek returns the next record, or nil at the end.
func (p *pager) peek(ctx context.Context) (*history.Record, error) {
	for len(p.buf) == 0 && !p.done {
		if err := p.fetch(ctx); err != nil {
			return nil, err
		}
	}
	if len(p.buf) == 0 {
		return nil, nil
	}
	return &p.buf[0], nil
}

// next drops the record peek returned.
func (p *pager) next() { p.buf = p.buf[1:] }

// fetch reads the next page, sized so that it holds about pageBytes.
func (p *pager) fetch(ctx context.Context) error {
	recs, err := p.st.Scan(ctx, p.space, history.ScanOptions{After: p.after, Limit: p.limit})
	if err != nil {
		return err
	}
	if len(recs) < p.limit {
		p.done = true
	}
	if len(recs) == 0 {
		return nil
	}
	p.after = recs[len(recs)-1].Key
	size := 0
	for _, r := range recs {
		size += len(r.Key) + len(r.Value)
	}
	p.limit = min(max(pageBytes/(size/len(recs)+1), minPage), maxPage)
	p.buf = recs[:0]
	for _, r := range recs {
		if !isMarker(p.space, r.Key) {
			p.buf = append(p.buf, r)
		}
	}
	return nil
}

// pair is the next record of a space in the source and in the target:
// both with the same key, or one of them (the other nil), the smaller key
// first.
type pair struct{ src, dst *history.Record }

// nextPair returns the next pair of two pagers walked side by side, and
// advances them past it; both nil at the end.
func nextPair(ctx context.Context, src, dst *pager) (pair, error) {
	s, err := src.peek(ctx)
	if err != nil {
		return pair{}, fmt.Errorf("read the source's %s space: %w", src.space, err)
	}
	d, err := dst.peek(ctx)
	if err != nil {
		return pair{}, fmt.Errorf("read the target's %s space: %w", dst.space, err)
	}
	switch {
	case s == nil && d == nil:
		return pair{}, nil
	case d == nil || (s != nil && bytes.Compare(s.Key, d.Key) < 0):
		src.next()
		return pair{src: s}, nil
	case s == nil || bytes.Compare(s.Key, d.Key) > 0:
		dst.next()
		return pair{dst: d}, nil
	}
	src.next()
	dst.next()
	return pair{src: s, dst: d}, nil
}

// copySpace copies every record of space sp the target does not hold; a
// record it holds with another value, or that the source does not hold,
// is ErrMismatch.
func (c *copier) copySpace(ctx context.Context, sp history.Space) error {
	c.now = Progress{Phase: PhaseRecords, Space: sp}
	sc := c.rep.space(sp)
	src := newPager(c.src, sp)
	var dstStore history.Store // an empty target is not read
	if c.resumed {
		dstStore = c.dst
	}
	dst := newPager(dstStore, sp)
	for {
		p, err := nextPair(ctx, src, dst)
		if err != nil {
			return fmt.Errorf("storecopy: %w", err)
		}
		if p.src == nil && p.dst == nil {
			break
		}
		if err := c.copyRecord(ctx, sp, sc, p); err != nil {
			return err
		}
	}
	if err := c.w.flush(ctx); err != nil {
		return err
	}
	c.now.Done = true
	c.progress()
	return nil
}

// copyRecord writes the pair's source record unless the target holds it.
func (c *copier) copyRecord(ctx context.Context, sp history.Space, sc *SpaceCopy, p pair) error {
	switch {
	case p.src == nil:
		return mismatch(recordDiff(sp, p.dst.Key, "in the target, not in the source"))
	case p.dst == nil:
		size := len(p.src.Key) + len(p.src.Value)
		sc.Records++
		sc.Bytes += int64(size)
		c.now.Records++
		return c.w.add(ctx, item{rec: p.src, size: size})
	case !bytes.Equal(p.src.Value, p.dst.Value):
		return mismatch(recordDiff(sp, p.src.Key, fmt.Sprintf("the target's value (%d bytes) differs from the source's (%d bytes)",
			len(p.dst.Value), len(p.src.Value))))
	}
	sc.Skipped++
	c.now.Skipped++
	return nil
}
