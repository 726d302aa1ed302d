package schedule

import (
	"errors"
	"testing"
	"time"
)

func mustCompile(t *testing.T, s Spec) *Compiled {
	t.Helper()
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", s, err)
	}
	return c
}

func times(t *testing.T, c *Compiled, from time.Time, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		next, ok := c.Next(from)
		if !ok {
			break
		}
		out = append(out, next.Format(time.RFC3339))
		from = next
	}
	return out
}

func equal(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestCronBasics(t *testing.T) {
	from := time.Date(2026, 1, 1, 10, 7, 30, 0, time.UTC)
	cases := []struct {
		cron string
		want []string
	}{
		{"* * * * *", []string{"2026-01-01T10:08:00Z", "2026-01-01T10:09:00Z"}},
		{"*/15 * * * *", []string{"2026-01-01T10:15:00Z", "2026-01-01T10:30:00Z"}},
		{"@hourly", []string{"2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"}},
		{"@daily", []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"0 9 * * MON-FRI", []string{"2026-01-02T09:00:00Z", "2026-01-05T09:00:00Z"}}, // Jan 1 2026 is a Thursday, 9:00 passed
		{"0 0 1 */6 *", []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"30 * * * * *", []string{"2026-01-01T10:08:30Z", "2026-01-01T10:09:30Z"}}, // seconds first
		{"0 0 13 * 5", []string{"2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z"}},   // dom OR dow when both restricted
		{"0 12 * * 7", []string{"2026-01-04T12:00:00Z", "2026-01-11T12:00:00Z"}},   // 7 is Sunday
		{"0 0 29 2 *", []string{"2028-02-29T00:00:00Z"}},
	}
	for _, tc := range cases {
		c := mustCompile(t, Spec{Cron: tc.cron})
		equal(t, times(t, c, from, len(tc.want)), tc.want)
	}
}

func TestCompileRejects(t *testing.T) {
	for _, s := range []Spec{
		{},
		{Cron: "* * *"},
		{Cron: "61 * * * *"},
		{Cron: "5-1 * * * *"},
		{Cron: "*/0 * * * *"},
		{Cron: "* * * * *", Interval: time.Minute},
		{Interval: time.Millisecond},
		{Interval: time.Minute, Offset: time.Minute},
		{Cron: "* * * * *", Offset: time.Second},
		{Cron: "* * * * *", TimeZone: "Mars/Olympus"},
		{Cron: "* * * * *", Jitter: -1},
		{Cron: "* * * * *", Start: time.Unix(100, 0), End: time.Unix(50, 0)},
		{Cron: "@every nonsense"},
	} {
		if _, err := Compile(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Compile(%+v) = %v, want ErrInvalid", s, err)
		}
	}
}

func TestCronNeverMatches(t *testing.T) {
	c := mustCompile(t, Spec{Cron: "0 0 31 2 *"})
	if n, ok := c.Next(time.Unix(0, 0)); ok {
		t.Fatalf("Feb 31 fired at %s", n)
	}
}

func TestIntervalWithOffset(t *testing.T) {
	c := mustCompile(t, Spec{Interval: time.Hour, Offset: 15 * time.Minute})
	from := time.Date(2026, 3, 8, 6, 15, 0, 0, time.UTC) // exactly on a nominal time: strictly after
	equal(t, times(t, c, from, 3), []string{"2026-03-08T07:15:00Z", "2026-03-08T08:15:00Z", "2026-03-08T09:15:00Z"})
	e := mustCompile(t, Spec{Cron: "@every 90s"})
	equal(t, times(t, e, time.Unix(0, 0).UTC(), 2), []string{"1970-01-01T00:01:30Z", "1970-01-01T00:03:00Z"})
	// Before the epoch too.
	equal(t, times(t, e, time.Unix(-100, 0).UTC(), 1), []string{"1969-12-31T23:58:30Z"})
}

func TestStartEnd(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := mustCompile(t, Spec{Cron: "@hourly", Start: start, End: start.Add(2 * time.Hour)})
	equal(t, times(t, c, start.Add(-48*time.Hour), 5), []string{"2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"})
}

// New York springs forward on 2026-03-08 (02:00 EST → 03:00 EDT) and falls
// back on 2026-11-01 (02:00 EDT → 01:00 EST).
func TestDSTSpringForwardSkipsTheMissingWallTime(t *testing.T) {
	c := mustCompile(t, Spec{Cron: "30 2 * * *", TimeZone: "America/New_York"})
	from := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	// 02:30 EST on the 7th (07:30Z); none on the 8th; 02:30 EDT on the 9th (06:30Z).
	equal(t, times(t, c, from, 2), []string{"2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"})
	// Hourly at :30 in the zone: 01:30 EST, then 03:30 EDT (one hour later in absolute time).
	h := mustCompile(t, Spec{Cron: "30 * * * *", TimeZone: "America/New_York"})
	equal(t, times(t, h, time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC), 2), []string{"2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"})
}

func TestDSTFallBackFiresOnceAtTheFirstOccurrence(t *testing.T) {
	c := mustCompile(t, Spec{Cron: "30 1 * * *", TimeZone: "America/New_York"})
	from := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	// 01:30 EDT (05:30Z) on Nov 1, not again at 01:30 EST (06:30Z); then 01:30 EST on Nov 2.
	equal(t, times(t, c, from, 2), []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"})
	// Every 30 minutes in the zone: 00:30 EDT, 01:00 EDT, 01:30 EDT, then 02:00 EST — the repeated hour is not fired again.
	h := mustCompile(t, Spec{Cron: "*/30 * * * *", TimeZone: "America/New_York"})
	equal(t, times(t, h, time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), 4),
		[]string{"2026-11-01T04:30:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z"})
	// Asked from inside the second occurrence, the next is after it too.
	equal(t, times(t, h, time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC), 1), []string{"2026-11-01T07:00:00Z"})
}

func TestJitterIsDeterministicAndBounded(t *testing.T) {
	c := mustCompile(t, Spec{Cron: "* * * * *", Jitter: 10 * time.Second})
	nom := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	for i := 0; i < 100; i++ {
		n := nom.Add(time.Duration(i) * time.Minute)
		j := c.Jitter("s", n)
		if j != c.Jitter("s", n) || j < 0 || j >= 10*time.Second {
			t.Fatalf("jitter %s", j)
		}
		if !c.Actual("s", n).Equal(n.Add(j)) {
			t.Fatal("Actual is not nominal plus jitter")
		}
		seen[j] = true
	}
	if len(seen) < 50 {
		t.Fatalf("jitter barely varies: %d distinct values of 100", len(seen))
	}
	if mustCompile(t, Spec{Cron: "* * * * *"}).Jitter("s", nom) != 0 {
		t.Fatal("jitter without Spec.Jitter")
	}
}

func TestBetween(t *testing.T) {
	c := mustCompile(t, Spec{Interval: time.Minute})
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, more := c.Between(from, from.Add(10*time.Minute), 3)
	if len(got) != 3 || more != 7 || !got[0].Equal(from.Add(time.Minute)) {
		t.Fatalf("got %v more %d", got, more)
	}
}

func BenchmarkNextEveryMinute(b *testing.B) {
	c, _ := Compile(Spec{Cron: "* * * * *"})
	t := time.Date(2026, 1, 1, 10, 7, 30, 0, time.UTC)
	for i := 0; i < b.N; i++ {
		t, _ = c.Next(t)
	}
}

func BenchmarkNextDailyInAZone(b *testing.B) {
	c, _ := Compile(Spec{Cron: "30 2 * * *", TimeZone: "America/New_York"})
	t := time.Date(2026, 1, 1, 10, 7, 30, 0, time.UTC)
	for i := 0; i < b.N; i++ {
		t, _ = c.Next(t)
	}
}
