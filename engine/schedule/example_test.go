package schedule_test

import (
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/schedule"
)

func Example() {
	c, err := schedule.Compile(schedule.Spec{Cron: "30 2 * * *", TimeZone: "America/New_York"})
	if err != nil {
		panic(err)
	}
	t := time.Date(2026, 3, 6, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		t, _ = c.Next(t)
		fmt.Println(t.Format(time.RFC3339), t.In(time.FixedZone("", 0)).Weekday())
	}
	// Output:
	// 2026-03-07T07:30:00Z Saturday
	// 2026-03-09T06:30:00Z Monday
	// 2026-03-10T06:30:00Z Tuesday
}
