package script

import (
	"strings"
	"testing"
)

const linkLibA = `-- lib_a: a test library.
-- Second header line.

-- one doubles.
local function one(x)
  return 2 * x
end

local limit = 16

-- two uses one.
local function two(x)
  return one(x) + limit
end

-- unused is called by nobody.
local function unused()
  return 0
end
`

const linkLibB = `-- lib_b: another.
local function three(x)
  if x then
    return two(x)
  end
end
local function four()
  return 4
end
`

// TestLinkKeepsWhatIsUsed checks that a body keeps the helpers its script
// uses, directly or through other helpers, each with its comment, and every
// library's header, and drops the rest.
func TestLinkKeepsWhatIsUsed(t *testing.T) {
	libs := []libFile{parseLib("lib_a", linkLibA), parseLib("lib_b", linkLibB)}
	body := link(libs, "-- s: a script.\nreturn three(1)")
	for _, want := range []string{"-- lib_a: a test library.\n-- Second header line.\n", "-- lib_b: another.", "-- one doubles.\nlocal function one(x)",
		"local limit = 16", "-- two uses one.\nlocal function two(x)", "local function three(x)\n  if x then\n    return two(x)\n  end\nend", "return three(1)"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	for _, gone := range []string{"unused", "four"} {
		if strings.Contains(body, gone) {
			t.Errorf("body keeps %q, which nothing uses:\n%s", gone, body)
		}
	}
	if one, two, three := strings.Index(body, "function one"), strings.Index(body, "function two"), strings.Index(body, "function three"); !(one < two && two < three) {
		t.Errorf("definitions out of order:\n%s", body)
	}
	if got := link(libs, "return 1"); strings.Contains(got, "function") {
		t.Errorf("a script that uses no helper got some:\n%s", got)
	}
}

// TestLinkPutsTheHeadFirst checks that a script with a helpers mark gets
// the helpers its head uses before the head, and those only the rest uses
// at the mark, each group in the libraries' order; and that a helper named
// only in a comment line is not linked.
func TestLinkPutsTheHeadFirst(t *testing.T) {
	libs := []libFile{parseLib("lib_a", linkLibA), parseLib("lib_b", linkLibB)}
	self := "-- s: a script; its header names four.\nif ARGV[1] then\n  return one(1)\nend\n" + helpersMark + ": the rest.\nreturn three(1) -- or two\n"
	body := link(libs, self)
	at := func(s string) int {
		i := strings.Index(body, s)
		if i < 0 {
			t.Fatalf("body lacks %q:\n%s", s, body)
		}
		return i
	}
	head, mark := at("return one(1)"), at(helpersMark)
	if one := at("function one"); one > head {
		t.Errorf("one, which the head calls, is defined after it:\n%s", body)
	}
	for _, f := range []string{"local limit", "function two", "function three"} {
		if i := at(f); i < mark || i > at("return three(1)") {
			t.Errorf("%s, which only the rest needs, is not linked at the mark:\n%s", f, body)
		}
	}
	if at("local limit") > at("function two") || at("function two") > at("function three") {
		t.Errorf("the rest's helpers out of order:\n%s", body)
	}
	if strings.Contains(body, "function four") {
		t.Errorf("four, named only in a comment, is linked:\n%s", body)
	}
	if strings.Count(body, "function one") != 1 {
		t.Errorf("one is defined twice:\n%s", body)
	}
}

// TestParseLibRefusesOtherStatements checks that a library's top level
// holding anything but local functions and one-line constants panics.
func TestParseLibRefusesOtherStatements(t *testing.T) {
	for _, src := range []string{
		"-- lib_x: x.\nredis.call('ping')\n",
		"-- lib_x: x.\nlocal t = {\n  a = 1,\n}\n",
		"-- lib_x: x.\nlocal function f()\n  return 1\n  end\n",
		"-- lib_x: x.\nlocal f = function() return 1 end\n",
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("parseLib accepted %q", src)
				}
			}()
			parseLib("lib_x", src)
		}()
	}
}

// TestEveryLibraryParses checks that every embedded library is one link
// understands, with no name defined twice.
func TestEveryLibraryParses(t *testing.T) {
	entries, err := files.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]string{}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".lua")
		if !strings.HasPrefix(name, "lib_") {
			continue
		}
		b, err := files.ReadFile("lua/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		lf := parseLib(name, string(b))
		if !strings.HasPrefix(lf.header, "-- "+name+":") {
			t.Errorf("%s: header %.40q", name, lf.header)
		}
		for _, p := range lf.pieces {
			if w, dup := where[p.name]; dup {
				t.Errorf("%s defined in %s and %s", p.name, w, name)
			}
			where[p.name] = name
		}
	}
	if len(where) < 40 {
		t.Errorf("%d definitions in the libraries; want the 40 or more there are", len(where))
	}
}

// TestSplitScriptsDefineBeforeUse links the scripts that have a helpers
// mark as core registers them and checks that, outside comments, no helper
// is named above its definition (Lua would find a nil global there), and
// that each keeps its mark; and that no script or library holds a long
// bracket ([[ or --[[), where code would take a line for a comment.
func TestSplitScriptsDefineBeforeUse(t *testing.T) {
	libs := []string{"lib_fence", "lib_queue", "lib_attempt", "lib_hold"}
	for _, name := range []string{"fair_acquire", "fair_release"} {
		parsed := make([]libFile, len(libs))
		for i, l := range libs {
			b, err := files.ReadFile("lua/" + l + ".lua")
			if err != nil {
				t.Fatal(err)
			}
			parsed[i] = parseLib(l, string(b))
		}
		self, err := files.ReadFile("lua/" + name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(self), "\n"+helpersMark) {
			t.Errorf("%s has no %q line", name, helpersMark)
		}
		body := code(link(parsed, string(self)))
		for _, line := range strings.Split(body, "\n") {
			fn, ok := strings.CutPrefix(line, "local function ")
			if !ok {
				continue
			}
			fn, _, _ = strings.Cut(fn, "(")
			def := strings.Index(body, "local function "+fn+"(")
			if use := strings.Index(body, fn+"("); use < def+len("local function ") {
				t.Errorf("%s: %s is called above its definition", name, fn)
			}
		}
	}
	entries, err := files.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := files.ReadFile("lua/" + e.Name())
		if strings.Contains(string(b), "[[") {
			t.Errorf("%s holds a long bracket", e.Name())
		}
	}
}
