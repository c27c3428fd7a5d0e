package script

import (
	"io/fs"
	"strings"
	"testing"
)

// TestHeaders checks that every Lua file opens with a header naming it,
// and that every script (not a library) says in it what KEYS, ARGV and its
// reply are.
func TestHeaders(t *testing.T) {
	paths, err := fs.Glob(files, "lua/*.lua")
	if err != nil || len(paths) == 0 {
		t.Fatalf("embedded Lua files: %v, %d found", err, len(paths))
	}
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "lua/"), ".lua")
		b, err := files.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var header []string
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header = append(header, line)
		}
		h := strings.Join(header, "\n")
		if !strings.HasPrefix(h, "-- "+name+":") {
			t.Errorf("%s: header starts %.40q, want %q", p, h, "-- "+name+":")
		}
		if strings.HasPrefix(name, "lib_") {
			continue
		}
		for _, want := range []string{"KEYS", "ARGV", "Returns"} {
			if !strings.Contains(h, want) {
				t.Errorf("%s: header does not say what %s are", p, want)
			}
		}
	}
}

// TestRegister checks that a script's body is its libraries, in the order
// named, then the script, and that a script queued with its body is
// recognised.
func TestRegister(t *testing.T) {
	s := Register("mutex_renew", "lib_lease", "lib_renew")
	if s.Name() != "mutex_renew" {
		t.Fatalf("Name() = %q, want mutex_renew", s.Name())
	}
	body := s.Body()
	lease, renew, self := strings.Index(body, "-- lib_lease:"), strings.Index(body, "-- lib_renew:"), strings.Index(body, "-- mutex_renew:")
	if lease != 0 || renew <= lease || self <= renew {
		t.Fatalf("body offsets lib_lease %d, lib_renew %d, mutex_renew %d: want 0 < … in that order", lease, renew, self)
	}
	if got := All(); got[len(got)-1] != s {
		t.Fatalf("All() does not end with the script just registered")
	}
	if (*Cache)(nil).SHA(s) != "" {
		t.Fatalf("a nil Cache knows a SHA")
	}
}

func TestRegisterMissingPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Register of a missing file did not panic")
		}
	}()
	Register("no_such_script")
}
