package adapter

import (
	"slices"
	"strings"
)

// maxSuggestions bounds the names Suggest offers.
const maxSuggestions = 3

// Suggest helps a start-up error about name, which is none of candidates
// (a typo in a method or service name, say), point at what was meant: it
// returns " (did you mean X?)" naming the candidates closest to name by
// edit distance (at most three, closest first), or "" when there are none.
func Suggest(name string, candidates []string) string {
	if len(candidates) == 0 {
		return ""
	}
	type scored struct {
		name string
		d    int
	}
	s := make([]scored, len(candidates))
	for i, c := range candidates {
		s[i] = scored{c, editDistance(name, c)}
	}
	slices.SortStableFunc(s, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	names := make([]string, 0, maxSuggestions)
	for _, c := range s[:min(len(s), maxSuggestions)] {
		names = append(names, c.name)
	}
	if n := len(names); n > 1 {
		names = append(names[:n-2], names[n-2]+" or "+names[n-1])
	}
	return " (did you mean " + strings.Join(names, ", ") + "?)"
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
