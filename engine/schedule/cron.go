package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// cronExpr is a parsed cron expression: one bit set per field (bit n set:
// value n allowed).
type cronExpr struct {
	second, minute, hour, dom, month, dow uint64
	// domStar and dowStar record a "*" (or "?") day field: standard cron
	// matches a day when both day fields match if either is "*", and when
	// either matches otherwise.
	domStar, dowStar bool
}

type fieldRange struct {
	min, max int
	names    map[string]int
}

var (
	secondRange = fieldRange{min: 0, max: 59}
	minuteRange = fieldRange{min: 0, max: 59}
	hourRange   = fieldRange{min: 0, max: 23}
	domRange    = fieldRange{min: 1, max: 31}
	monthRange  = fieldRange{min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}}
	// dowRange allows 7 for Sunday (folded onto 0 after parsing).
	dowRange = fieldRange{min: 0, max: 7, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}}
)

var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// parseCron parses a 5-field (minute hour day-of-month month day-of-week)
// or 6-field (second first) expression, or a macro.
func parseCron(s string) (*cronExpr, error) {
	s = strings.TrimSpace(s)
	if m, ok := macros[strings.ToLower(s)]; ok {
		s = m
	}
	f := strings.Fields(s)
	if len(f) == 5 {
		f = append([]string{"0"}, f...)
	}
	if len(f) != 6 {
		return nil, fmt.Errorf("cron %q: want 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or a macro (@hourly, @daily, @weekly, @monthly, @yearly)", s)
	}
	c := &cronExpr{}
	var err error
	fields := []struct {
		dst  *uint64
		r    fieldRange
		name string
	}{{&c.second, secondRange, "second"}, {&c.minute, minuteRange, "minute"}, {&c.hour, hourRange, "hour"},
		{&c.dom, domRange, "day-of-month"}, {&c.month, monthRange, "month"}, {&c.dow, dowRange, "day-of-week"}}
	for i, fd := range fields {
		if *fd.dst, err = parseField(f[i], fd.r); err != nil {
			return nil, fmt.Errorf("cron %q: %s field: %w", s, fd.name, err)
		}
	}
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1
	}
	c.domStar = f[3] == "*" || f[3] == "?"
	c.dowStar = f[5] == "*" || f[5] == "?"
	return c, nil
}

// parseField parses a comma-separated list of "*", "n", "a-b", each
// optionally "/step".
func parseField(s string, r fieldRange) (uint64, error) {
	var bitsSet uint64
	for _, part := range strings.Split(s, ",") {
		b, err := parsePart(part, r)
		if err != nil {
			return 0, err
		}
		bitsSet |= b
	}
	return bitsSet, nil
}

func parsePart(part string, r fieldRange) (uint64, error) {
	rng, stepStr, hasStep := strings.Cut(part, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepStr)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("bad step %q", stepStr)
		}
		step = n
	}
	lo, hi := r.min, r.max
	switch {
	case rng == "*" || rng == "?":
		if r.max == 7 { // day of week: * is 0-6
			hi = 6
		}
	default:
		a, b, isRange := strings.Cut(rng, "-")
		var err error
		if lo, err = r.value(a); err != nil {
			return 0, err
		}
		hi = lo
		if isRange {
			if hi, err = r.value(b); err != nil {
				return 0, err
			}
		} else if hasStep {
			hi = r.max
		}
		if hi < lo {
			return 0, fmt.Errorf("range %q is backwards", rng)
		}
	}
	var out uint64
	for v := lo; v <= hi; v += step {
		out |= 1 << uint(v)
	}
	return out, nil
}

func (r fieldRange) value(s string) (int, error) {
	if n, ok := r.names[strings.ToLower(s)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("bad value %q", s)
	}
	if n < r.min || n > r.max {
		return 0, fmt.Errorf("value %d out of range %d-%d", n, r.min, r.max)
	}
	return n, nil
}

// dayMatches reports whether the calendar day matches the day fields.
func (c *cronExpr) dayMatches(t time.Time) bool {
	if c.month&(1<<uint(t.Month())) == 0 {
		return false
	}
	domOK := c.dom&(1<<uint(t.Day())) != 0
	dowOK := c.dow&(1<<uint(t.Weekday())) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// maxSearchDays bounds the search for the next matching day (a "30 2 31 2 *"
// never matches).
const maxSearchDays = 366 * 5

// next returns the first time strictly after `after` whose wall clock in
// loc matches. A wall time that does not exist in loc (the clock jumps over
// it) does not fire that day; a wall time that occurs twice fires once, at
// its first occurrence.
//
// The search starts at `after`'s own wall time: a wall time before it has
// its first occurrence before `after` too (in the repeated hour of a fall
// back, `after` may be in the second pass; an earlier wall time's first
// occurrence is then in the first). Candidates from there on are resolved
// and kept only if they come after `after`.
func (c *cronExpr) next(after time.Time, loc *time.Location) (time.Time, bool) {
	local := after.In(loc)
	day := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	floor := wallClock{local.Hour(), local.Minute(), local.Second()}
	for i := 0; i < maxSearchDays; i++ {
		d := day.AddDate(0, 0, i)
		if !c.dayMatches(d) {
			continue
		}
		if i > 0 {
			floor = wallClock{}
		}
		if t, ok := c.nextInDay(d, floor, after, loc); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// wallClock is a time of day.
type wallClock struct{ h, m, s int }

func (c *cronExpr) nextInDay(d time.Time, floor wallClock, after time.Time, loc *time.Location) (time.Time, bool) {
	for h := range setBits(c.hour, floor.h) {
		fromM := 0
		if h == floor.h {
			fromM = floor.m
		}
		for m := range setBits(c.minute, fromM) {
			fromS := 0
			if h == floor.h && m == floor.m {
				fromS = floor.s
			}
			for s := range setBits(c.second, fromS) {
				t, ok := resolve(d.Year(), d.Month(), d.Day(), h, m, s, loc)
				if ok && t.After(after) {
					return t, true
				}
			}
		}
	}
	return time.Time{}, false
}

// setBits yields the set bits of b from `from` up, ascending.
func setBits(b uint64, from int) func(func(int) bool) {
	return func(yield func(int) bool) {
		b &^= (1 << uint(from)) - 1
		for b != 0 {
			v := bits.TrailingZeros64(b)
			if !yield(v) {
				return
			}
			b &^= 1 << uint(v)
		}
	}
}

// resolve returns the first instant whose wall clock in loc reads the
// given date and time, or false when the clock skips it.
func resolve(y int, mo time.Month, d, h, mi, s int, loc *time.Location) (time.Time, bool) {
	wall := time.Date(y, mo, d, h, mi, s, 0, time.UTC)
	var best time.Time
	found := false
	// The zone's offsets around that day: before and after any change.
	for _, probe := range []time.Duration{-26 * time.Hour, 0, 26 * time.Hour} {
		_, off := wall.Add(probe).In(loc).Zone()
		t := wall.Add(-time.Duration(off) * time.Second)
		l := t.In(loc)
		if l.Year() != y || l.Month() != mo || l.Day() != d || l.Hour() != h || l.Minute() != mi || l.Second() != s {
			continue
		}
		if !found || t.Before(best) {
			best, found = t, true
		}
	}
	return best.UTC(), found
}
