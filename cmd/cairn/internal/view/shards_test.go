package view

import (
	"slices"
	"testing"
)

func TestRanges(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{5}, "5"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{12, 9, 7, 10, 0, 11, 2, 1, 3}, "0-3,7,9-12"},
		{[]int{1, 3, 5}, "1,3,5"},
		{[]int{254, 255, 4}, "4,254-255"},
	} {
		in := slices.Clone(c.in)
		if got := Ranges(in); got != c.want {
			t.Errorf("Ranges(%v) = %q, want %q", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("Ranges(%v) changed its argument to %v", c.in, in)
		}
	}
}
