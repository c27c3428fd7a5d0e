package chaos

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
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

// A worker killed while it was not running reports, through its tick file,
// since when it had not run.
func TestKillReportsAStarvedWorker(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ago     time.Duration
		starved bool
	}{{"ticking", time.Millisecond, false}, {"not running", 300 * time.Millisecond, true}} {
		t.Run(tc.name, func(t *testing.T) {
			tick := filepath.Join(t.TempDir(), "w.jsonl.tick")
			f, err := os.OpenFile(tick, os.O_CREATE|os.O_WRONLY, 0o644) // as watchSchedule writes it
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			writeTick := func(at int64) {
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], uint64(at))
				if _, err := f.WriteAt(b[:], 0); err != nil {
					t.Error(err)
				}
			}
			cmd := exec.Command("sleep", "30")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			last := event.Now() - int64(tc.ago)
			writeTick(last)
			stop := make(chan struct{})
			ticking := make(chan struct{})
			go func() { // a running worker's schedule watch: a tick every millisecond
				defer close(ticking)
				for !tc.starved {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
						writeTick(event.Now())
					}
				}
			}()
			p := &proc{cmd: cmd, tick: tick, done: make(chan struct{})}
			go func() { _ = cmd.Wait(); close(p.done) }()
			at, since := p.kill()
			close(stop)
			<-ticking
			switch {
			case tc.starved && since != last+int64(scheduleTick):
				t.Fatalf("starved since %d, want %d", since, last+int64(scheduleTick))
			case !tc.starved && since != 0:
				t.Fatalf("starved since %d, want none", since)
			case at < last:
				t.Fatalf("killed at %d, before the last tick %d", at, last)
			}
		})
	}
}
