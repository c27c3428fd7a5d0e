package tracing_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/keylock/keylock/tracing"
)

// TestVersionMatchesChangelog: tracing.Version is the newest release in
// CHANGELOG.md (the first "## [x.y.z] - date" heading after Unreleased).
func TestVersionMatchesChangelog(t *testing.T) {
	b, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading like \"## [0.1.0] - 2026-11-22\"")
	}
	if got := string(m[1]); got != tracing.Version {
		t.Errorf("tracing.Version = %q, but the newest release in CHANGELOG.md is %q", tracing.Version, got)
	}
	if !regexp.MustCompile(`(?m)^## \[Unreleased\]$`).Match(b) {
		t.Error("CHANGELOG.md has no \"## [Unreleased]\" section for the next changes")
	}
}
