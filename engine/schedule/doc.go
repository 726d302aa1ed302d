// Package schedule is the arithmetic of schedules, with no I/O and no
// clock: a Spec (a cron expression or an interval with an offset, a time
// zone, start and end times, a jitter) compiled into the nominal times it
// names.
//
//	c, err := schedule.Compile(schedule.Spec{Cron: "30 2 * * *", TimeZone: "America/New_York"})
//	if err != nil { … } // wraps schedule.ErrInvalid
//	next, ok := c.Next(now)           // the first nominal time after now (UTC)
//	due := c.Actual("nightly", next)  // plus the schedule's jitter for that time
//
// Daylight saving time. A cron expression is read on the wall clock of
// its time zone. A wall time the clock skips (spring forward: 02:30 on the
// day New York goes from 02:00 to 03:00) does not fire that day; a wall
// time the clock shows twice (fall back: 01:30 on the day it goes from
// 02:00 back to 01:00) fires once, at its first occurrence. (Temporal
// documents no special handling: its 2:30am may fire zero, one or two times
// a day; Cairn skips the same gap and fires the repeated time once.)
// Intervals are counted in absolute time from the Unix epoch (plus the
// offset) and ignore the zone.
//
// Jitter is derived from the schedule id and the nominal time (FNV-1a), so
// it is the same on every server and every retry.
package schedule
