package view

import (
	"slices"
	"strconv"
	"strings"
)

// Ranges writes shard numbers compactly, sorted, runs of consecutive
// numbers as ranges: "0-3,7,9-12" (`cairn cluster describe` and the web
// UI's Cluster page). It does not change ns.
func Ranges(ns []int) string {
	ns = slices.Sorted(slices.Values(ns))
	var b strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] <= ns[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ns[i]))
		if ns[j] > ns[i] {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ns[j]))
		}
		i = j + 1
	}
	return b.String()
}
