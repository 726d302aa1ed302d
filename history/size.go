package history

import (
	"math"
	"sync"
	"time"
)

// EventSize returns the length of ev's envelope, as EncodeEvent would write
// it, without writing it: a sum over the attributes' fields, cheap enough
// to take for every event a worker replays (sdk.WorkflowInfo.HistorySize).
// An event EncodeEvent refuses has size 0.
func EventSize(ev Event) int64 {
	f, ok := ev.Attrs.(fielder)
	if !ok || isNilPointer(ev.Attrs) || ev.ID <= 0 {
		return 0
	}
	var nanos int64
	if !ev.Time.IsZero() {
		nanos = ev.Time.UnixNano()
	}
	zigzag := uint64(nanos<<1) ^ uint64(nanos>>63)
	s := sizerPool.Get().(*sizer)
	*s = sizer{}
	s.structOf(f)
	n := s.n
	sizerPool.Put(s)
	return int64(headerLen+uvarintLen(uint64(ev.ID))+uvarintLen(zigzag)) + n
}

var sizerPool = sync.Pool{New: func() any { return new(sizer) }}

// sizer counts what binEncoder writes.
type sizer struct {
	n      int64
	fields int // fields counted in the innermost struct
}

func (s *sizer) structOf(f fielder) {
	outer := s.fields
	s.fields = 0
	f.fields(s)
	s.n += arrayHeaderSize(s.fields)
	s.fields = outer
}

func arrayHeaderSize(n int) int64 {
	switch {
	case n < 16:
		return 1
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

func uintSize(v uint64) int64 {
	switch {
	case v <= math.MaxInt8:
		return 1
	case v <= math.MaxUint8:
		return 2
	case v <= math.MaxUint16:
		return 3
	case v <= math.MaxUint32:
		return 5
	}
	return 9
}

func intSize(v int64) int64 {
	switch {
	case v >= 0:
		return uintSize(uint64(v))
	case v >= -32:
		return 1
	case v >= math.MinInt8:
		return 2
	case v >= math.MinInt16:
		return 3
	case v >= math.MinInt32:
		return 5
	}
	return 9
}

func strSize(n int) int64 {
	switch {
	case n < 32:
		return 1 + int64(n)
	case n <= math.MaxUint8:
		return 2 + int64(n)
	case n <= math.MaxUint16:
		return 3 + int64(n)
	}
	return 5 + int64(n)
}

func binSize(v []byte) int64 {
	n := len(v)
	switch {
	case v == nil:
		return 1
	case n <= math.MaxUint8:
		return 2 + int64(n)
	case n <= math.MaxUint16:
		return 3 + int64(n)
	}
	return 5 + int64(n)
}

func timeSize(t time.Time) int64 {
	sec, nsec := t.Unix(), uint64(t.Nanosecond())
	if uint64(sec)>>34 == 0 {
		if (nsec<<34|uint64(sec))>>32 == 0 {
			return 6
		}
		return 10
	}
	return 15
}

func (s *sizer) str(_ string, p *string)             { s.fields++; s.n += strSize(len(*p)) }
func (s *sizer) boolean(_ string, _ *bool)           { s.fields++; s.n++ }
func (s *sizer) int64(_ string, p *int64)            { s.fields++; s.n += intSize(*p) }
func (s *sizer) int32(_ string, p *int32)            { s.fields++; s.n += intSize(int64(*p)) }
func (s *sizer) duration(_ string, p *time.Duration) { s.fields++; s.n += intSize(int64(*p)) }
func (s *sizer) float64(_ string, _ *float64)        { s.fields++; s.n += 9 }
func (s *sizer) time(_ string, p *time.Time)         { s.fields++; s.n += timeSize(*p) }
func (s *sizer) enum(_ string, p *uint8, _ []string) { s.fields++; s.n += uintSize(uint64(*p)) }

func (s *sizer) strings(_ string, p *[]string) {
	s.fields++
	if *p == nil {
		s.n++
		return
	}
	s.n += arrayHeaderSize(len(*p))
	for _, v := range *p {
		s.n += strSize(len(v))
	}
}

func (s *sizer) payload(_ string, p *Payload) {
	s.fields++
	s.n += 1 + strSize(len(p.Encoding)) + binSize(p.Data) + binSize(p.Ref)
}

func (s *sizer) object(_ string, p fielder) { s.fields++; s.structOf(p) }

func (s *sizer) failurePtr(_ string, p **Failure) {
	s.fields++
	if *p == nil {
		s.n++
		return
	}
	s.structOf(*p)
}

func (s *sizer) retryPolicyPtr(_ string, p **RetryPolicy) {
	s.fields++
	if *p == nil {
		s.n++
		return
	}
	s.structOf(*p)
}
