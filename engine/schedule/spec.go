package schedule

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones on hosts without /usr/share/zoneinfo
)

// ErrInvalid is wrapped by every error Compile returns.
var ErrInvalid = errors.New("schedule: invalid spec")

// MinInterval is the shortest interval a spec may have.
const MinInterval = time.Second

// Spec says when a schedule's actions happen: a cron expression or an
// interval (exactly one), in a time zone, between optional start and end
// times, each nominal time shifted by a jitter.
type Spec struct {
	// Cron is a cron expression: 5 fields (minute hour day-of-month month
	// day-of-week), 6 with a seconds field first, or @hourly, @daily
	// (@midnight), @weekly, @monthly, @yearly (@annually); "@every 90s"
	// is an interval. Fields take *, n, a-b, lists and /step; months and
	// days of the week take names (JAN, MON); day of week 7 is Sunday.
	Cron string
	// Interval fires every Interval since the Unix epoch, plus Offset
	// (0 ≤ Offset < Interval): Interval 1h and Offset 15m fire at a
	// quarter past every hour, whatever the time zone.
	Interval time.Duration
	Offset   time.Duration
	// Jitter delays each action by a duration in [0, Jitter), derived from
	// the schedule id and the nominal time (the same on every retry).
	Jitter time.Duration
	// TimeZone is an IANA zone name ("Europe/Paris") for cron expressions
	// (default UTC).
	TimeZone string
	// Start and End bound the nominal times (zero: unbounded).
	Start, End time.Time
}

// Compiled is a validated spec, ready to compute its times. It is
// immutable and safe for concurrent use.
type Compiled struct {
	spec Spec
	cron *cronExpr
	loc  *time.Location
}

// Compile validates a spec.
func Compile(s Spec) (*Compiled, error) {
	c := &Compiled{spec: s, loc: time.UTC}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Cron), "@every "); ok {
		if s.Interval != 0 {
			return nil, fmt.Errorf("%w: give a cron expression or an interval, not both", ErrInvalid)
		}
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrInvalid, s.Cron, err)
		}
		c.spec.Cron, c.spec.Interval = "", d
	}
	switch {
	case c.spec.Cron != "" && c.spec.Interval != 0:
		return nil, fmt.Errorf("%w: give a cron expression or an interval, not both", ErrInvalid)
	case c.spec.Cron != "":
		expr, err := parseCron(c.spec.Cron)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		c.cron = expr
	case c.spec.Interval != 0:
		if c.spec.Interval < MinInterval {
			return nil, fmt.Errorf("%w: interval %s is shorter than %s", ErrInvalid, c.spec.Interval, MinInterval)
		}
		if c.spec.Offset < 0 || c.spec.Offset >= c.spec.Interval {
			return nil, fmt.Errorf("%w: offset %s must be in [0, interval %s)", ErrInvalid, c.spec.Offset, c.spec.Interval)
		}
	default:
		return nil, fmt.Errorf("%w: a cron expression or an interval is required", ErrInvalid)
	}
	if c.spec.Cron != "" && c.spec.Offset != 0 {
		return nil, fmt.Errorf("%w: an offset applies to an interval only", ErrInvalid)
	}
	if s.Jitter < 0 {
		return nil, fmt.Errorf("%w: jitter must not be negative", ErrInvalid)
	}
	if !s.Start.IsZero() && !s.End.IsZero() && s.End.Before(s.Start) {
		return nil, fmt.Errorf("%w: end %s is before start %s", ErrInvalid, s.End, s.Start)
	}
	if s.TimeZone != "" {
		loc, err := time.LoadLocation(s.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("%w: time zone %q: %w", ErrInvalid, s.TimeZone, err)
		}
		c.loc = loc
	}
	return c, nil
}

// Spec returns the spec as compiled ("@every" turned into Interval).
func (c *Compiled) Spec() Spec { return c.spec }

// Next returns the first nominal time strictly after `after`, or false
// when there is none (past End, or a cron expression that never matches).
// Nominal times are UTC.
func (c *Compiled) Next(after time.Time) (time.Time, bool) {
	if !c.spec.Start.IsZero() && after.Before(c.spec.Start) {
		after = c.spec.Start.Add(-time.Nanosecond)
	}
	var t time.Time
	if c.cron != nil {
		var ok bool
		if t, ok = c.cron.next(after.Truncate(time.Second), c.loc); !ok {
			return time.Time{}, false
		}
	} else {
		t = c.nextInterval(after)
	}
	if !c.spec.End.IsZero() && t.After(c.spec.End) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// nextInterval: the epoch plus Offset plus the least multiple of Interval
// past `after`.
func (c *Compiled) nextInterval(after time.Time) time.Time {
	iv, off := int64(c.spec.Interval), int64(c.spec.Offset)
	n := after.UnixNano() - off
	k := n / iv
	if n >= 0 || n%iv == 0 {
		k++
	}
	return time.Unix(0, k*iv+off).UTC()
}

// Between returns the nominal times in (from, to], at most limit of them
// (limit ≤ 0: no limit), and how many more there were past the limit.
func (c *Compiled) Between(from, to time.Time, limit int) (times []time.Time, more int) {
	t := from
	for {
		n, ok := c.Next(t)
		if !ok || n.After(to) {
			return times, more
		}
		if limit > 0 && len(times) >= limit {
			more++
		} else {
			times = append(times, n)
		}
		t = n
	}
}

// Jitter returns the delay of the action of a nominal time: in
// [0, Spec.Jitter), a hash of the schedule id and the nominal time, so a
// server that retries the action after a crash computes the same one.
func (c *Compiled) Jitter(scheduleID string, nominal time.Time) time.Duration {
	if c.spec.Jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(scheduleID))
	_, _ = h.Write([]byte(nominal.UTC().Format(time.RFC3339Nano)))
	return time.Duration(h.Sum64() % uint64(c.spec.Jitter))
}

// Actual returns when the action of a nominal time is due: the nominal
// time plus its jitter.
func (c *Compiled) Actual(scheduleID string, nominal time.Time) time.Time {
	return nominal.Add(c.Jitter(scheduleID, nominal))
}
