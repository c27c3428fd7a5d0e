package readme

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackerRef is a bare issue or task number ("issue 7", "Task #12", also
// broken across a comment's lines): a reference to a tracker the reader
// does not have. Another project's issue is written as owner/repo#N or as
// a full URL, which it does not match.
var trackerRef = regexp.MustCompile(`(?i)\b(?:issue|task)s?(?:\s|//|\*)*#?\d+\b`)

// TestNoTrackerNumbers: no tracked Go or Markdown file of the repository
// names an issue or a task by a bare number; code, comments and docs
// speak of the project itself.
func TestNoTrackerNumbers(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "-z", "--", "*.go", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 50 {
		t.Fatalf("git ls-files lists %d Go and Markdown files; want the repository's", len(files))
	}
	for _, f := range files {
		if f == "internal/readme/refs_test.go" {
			continue // this file: the pattern's examples
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, loc := range trackerRef.FindAllIndex(b, -1) {
			line := 1 + bytes.Count(b[:loc[0]], []byte("\n"))
			t.Errorf("%s:%d: %q names an issue or task by number; say what it is about (another project's: owner/repo#N or a URL)",
				f, line, b[loc[0]:loc[1]])
		}
	}
}

func TestTrackerRefPattern(t *testing.T) {
	for text, want := range map[string]bool{
		"the lock bypass of issue 11":                   true,
		"see Issue #4":                                  true,
		"Task 3 asks":                                   true,
		"the bypass of issue\n// 11: a value":           true,
		"tasks 2 and 5":                                 true,
		"hibiken/asynq#123":                             false,
		"https://github.com/redis/go-redis/issues/2765": false,
		"10 tasks, 3 issues":                            false,
		"a task's 2nd attempt":                          false,
		"task:42":                                       false,
	} {
		if got := trackerRef.MatchString(text); got != want {
			t.Errorf("trackerRef.MatchString(%q) = %v, want %v", text, got, want)
		}
	}
}
