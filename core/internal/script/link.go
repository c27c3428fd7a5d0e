package script

import (
	"fmt"
	"strings"
)

// A script's libraries are linked into its body, not pasted whole: every
// EVAL runs the body from its first line, so each helper a body defines is
// a closure Redis builds, and later collects, on every call of the script.
// link keeps only the helpers the script uses, directly or through other
// helpers (a fair lock's acquire needs about a third of lib_queue).

// piece is one top-level definition of a library file: a local function,
// or a local constant on one line, with the comment lines just above it.
type piece struct {
	name string
	text string
}

// libFile is a library split into its header (the comment block that
// opens the file) and its definitions, in order.
type libFile struct {
	header string
	pieces []piece
}

// parseLib splits a library's source. Its top level may hold only comments,
// blank lines, `local function name(...)` … `end` (the closing `end` alone
// at the start of a line) and one-line `local name = value` constants;
// anything else panics, so a library edited beyond what link understands
// fails when the package initialises, not in Redis.
func parseLib(file, src string) libFile {
	lines := strings.Split(strings.TrimRight(src, "\n"), "\n")
	var lf libFile
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "--") {
		i++
	}
	lf.header = strings.Join(lines[:i], "\n") + "\n"
	var pending []string // comment and blank lines above the next definition
	for ; i < len(lines); i++ {
		line := lines[i]
		if line == "" || strings.HasPrefix(line, "--") {
			pending = append(pending, line)
			continue
		}
		name, fn := definedName(line)
		if name == "" {
			panic(fmt.Sprintf("keylock: %s.lua line %d: a library's top level holds only local functions and one-line local constants: %q", file, i+1, line))
		}
		start := i
		if fn {
			for i < len(lines) && lines[i] != "end" {
				i++
			}
			if i == len(lines) {
				panic(fmt.Sprintf("keylock: %s.lua: function %s has no closing `end` at the start of a line", file, name))
			}
		}
		text := strings.Join(append(pending, lines[start:i+1]...), "\n") + "\n"
		lf.pieces = append(lf.pieces, piece{name: name, text: text})
		pending = nil
	}
	return lf
}

// definedName returns the name a top-level line defines, and whether it
// opens a function; "" if it defines nothing link understands.
func definedName(line string) (string, bool) {
	if rest, ok := strings.CutPrefix(line, "local function "); ok {
		name, _, ok := strings.Cut(rest, "(")
		if ok && isIdent(name) {
			return name, true
		}
		return "", false
	}
	if rest, ok := strings.CutPrefix(line, "local "); ok {
		name, _, ok := strings.Cut(rest, " = ")
		if ok && isIdent(name) && !strings.ContainsAny(rest, "{(") {
			return name, false
		}
	}
	return "", false
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// identifiers adds every identifier-like word of src to set (words in
// strings and trailing comments too: that can keep a helper nobody calls,
// never drop one that is called).
func identifiers(src string, set map[string]bool) {
	start := -1
	for i := 0; i <= len(src); i++ {
		word := i < len(src) && (src[i] == '_' || src[i] >= 'a' && src[i] <= 'z' || src[i] >= 'A' && src[i] <= 'Z' || src[i] >= '0' && src[i] <= '9')
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			set[src[start:i]] = true
			start = -1
		}
	}
}

// helpersMark opens a line of a script that splits it in two: the part
// above it (its head: typically the uncontended path, which returns early)
// runs before the definitions of the helpers only the part below needs.
// link puts there the helpers the head does not use, so a call the head
// answers never builds them. A script without the line has no head: every
// helper it uses comes first.
const helpersMark = "-- @helpers"

// link returns the body of a script whose own source is self, preceded by
// the definitions of libs it needs: those self names, and those they name,
// transitively. A definition can name only those above it (Lua's locals),
// so one pass from the last definition up finds them all. When self has a
// helpersMark line, the helpers its head needs come before the head, and
// the others, which only the rest needs, after the mark; each group keeps the
// libraries' order, so a definition still follows every one it names.
// Each library keeps its header (at the top), so a body still says which
// libraries it holds.
func link(libs []libFile, self string) string {
	head, rest := "", self
	if i := strings.Index(self, "\n"+helpersMark); i >= 0 {
		head, rest = self[:i+1], self[i+1:]
	}
	first := needed(libs, head)
	all := needed(libs, head+rest)
	var b strings.Builder
	for _, lf := range libs {
		b.WriteString(lf.header)
	}
	// defs writes the definitions keep marks and done does not.
	defs := func(keep, done [][]bool) {
		for l, lf := range libs {
			for p, pc := range lf.pieces {
				if keep[l][p] && !done[l][p] {
					b.WriteString(pc.text)
				}
			}
		}
		b.WriteByte('\n')
	}
	if head != "" {
		defs(first, needed(libs, "")) // needed(libs, ""): nothing done yet
		b.WriteString(head)
		mark, after, _ := strings.Cut(rest, "\n")
		b.WriteString(mark + "\n")
		rest = after
	}
	defs(all, first)
	b.WriteString(rest)
	b.WriteByte('\n')
	return b.String()
}

// needed marks, per library and definition, those src names directly or
// through other definitions, outside comment lines (so that a comment
// naming a helper does not pull it into a head).
func needed(libs []libFile, src string) [][]bool {
	need := map[string]bool{}
	identifiers(code(src), need)
	keep := make([][]bool, len(libs))
	for l := len(libs) - 1; l >= 0; l-- {
		keep[l] = make([]bool, len(libs[l].pieces))
		for p := len(libs[l].pieces) - 1; p >= 0; p-- {
			pc := libs[l].pieces[p]
			if need[pc.name] {
				keep[l][p] = true
				identifiers(code(pc.text), need)
			}
		}
	}
	return keep
}

// code returns src without its comment lines (those whose first non-blank
// characters are --). The scripts hold no long strings, where such a line
// could be data; a comment after code on its line is kept, which can only
// keep a helper nobody calls.
func code(src string) string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		if !strings.HasPrefix(strings.TrimLeft(line, " \t"), "--") {
			b.WriteString(line)
		}
	}
	return b.String()
}
