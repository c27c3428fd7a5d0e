package chaos

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRaceSignatures(t *testing.T) {
	const report = `==================
WARNING: DATA RACE
Read at 0x00c0004818d0 by goroutine 20:
  github.com/keylock/keylock/core.(*fairAttempt).leave()
      /work/core/fair.go:156 +0x4c9
  github.com/keylock/keylock/core.(*FairMutex).lock()
      /work/core/fair.go:109 +0x1b6

Previous write at 0x00c0004818d0 by goroutine 1436:
  github.com/keylock/keylock/core.(*fairAttempt).acquire()
      /work/core/fair.go:128 +0x6c

Goroutine 20 (running) created at:
  main.main()
==================
==================
WARNING: DATA RACE
Read at 0x00c0004818e0 by goroutine 21:
  github.com/keylock/keylock/core.(*fairAttempt).leave()
      /work/core/fair.go:156 +0x4c9

Previous write at 0x00c0004818e0 by goroutine 1500:
  github.com/keylock/keylock/core.(*fairAttempt).acquire()
      /work/core/fair.go:128 +0x6c
==================
`
	path := filepath.Join(t.TempDir(), "w.stderr")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	got := raceSignatures(path)
	want := []string{"race: read github.com/keylock/keylock/core.(*fairAttempt).leave (fair.go:156) vs write github.com/keylock/keylock/core.(*fairAttempt).acquire (fair.go:128)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if err := os.WriteFile(path, []byte("panic: boom\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := raceSignatures(path); got != nil {
		t.Fatalf("no race: got %q", got)
	}
}
