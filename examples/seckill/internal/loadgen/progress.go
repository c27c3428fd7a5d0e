package loadgen

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress reports a run's progress: a bar redrawn in place on a terminal,
// or a plain line every second otherwise. Its one goroutine is started by
// startProgress and stopped (and waited for) by stop.
type progress struct {
	w      io.Writer
	bar    bool
	total  int
	done   *atomic.Int64
	counts *[numOutcomes]atomic.Int64
	start  time.Time

	stopc chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	lastNote string
	noteAt   time.Time
}

func startProgress(cfg Config, done *atomic.Int64, counts *[numOutcomes]atomic.Int64) *progress {
	p := &progress{w: cfg.Progress, bar: cfg.ProgressBar, total: cfg.Requests, done: done, counts: counts, start: time.Now(), stopc: make(chan struct{})}
	if p.w == nil {
		return p
	}
	every := time.Second
	if p.bar {
		every = 100 * time.Millisecond
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-t.C:
				p.draw()
			}
		}
	})
	return p
}

// line is the progress text: done/total, rate and the outcomes so far.
func (p *progress) line() string {
	n := p.done.Load()
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(n) / el
	}
	return fmt.Sprintf("%3d%%  %d/%d  %5.0f req/s  accepted %d  sold out %d  busy %d  errors %d",
		100*n/int64(max(p.total, 1)), n, p.total, rate,
		p.counts[Accepted].Load(), p.counts[SoldOut].Load(), p.counts[Busy].Load(), p.counts[Failed].Load())
}

func (p *progress) draw() {
	if !p.bar {
		fmt.Fprintln(p.w, "progress: "+p.line())
		return
	}
	const width = 30
	n := p.done.Load()
	full := int(int64(width) * n / int64(max(p.total, 1)))
	fmt.Fprintf(p.w, "\r[%s%s] %s\x1b[K", strings.Repeat("█", full), strings.Repeat("░", width-full), p.line())
}

// stop ends the progress goroutine; on a bar, it draws the final state and
// ends the line. final, if not empty, is printed after it.
func (p *progress) stop(final string) {
	if p.w == nil {
		return
	}
	close(p.stopc)
	p.wg.Wait()
	if p.bar {
		p.draw()
		fmt.Fprintln(p.w)
	}
	if final != "" {
		fmt.Fprintln(p.w, final)
	}
}

// note prints msg when it changed, at most once a second, after the run's
// first second (so a quick drain prints nothing).
func (p *progress) note(msg string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if msg == p.lastNote || now.Sub(p.noteAt) < time.Second {
		return
	}
	if p.noteAt.IsZero() {
		p.noteAt = now // start the clock: the first second stays quiet
		return
	}
	p.lastNote, p.noteAt = msg, now
	fmt.Fprintln(p.w, msg)
}
