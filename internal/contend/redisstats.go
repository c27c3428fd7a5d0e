package contend

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandStats is INFO commandstats: calls per command name ("evalsha",
// "client|setinfo", …). Redis counts the commands a script runs as well as
// the script itself.
type commandStats map[string]int64

// serverStats is what the harness reads from the server at one moment.
type serverStats struct {
	calls commandStats
	cpu   time.Duration // used_cpu_sys + used_cpu_user
}

// since returns s − before.
func (s serverStats) since(before serverStats) serverStats {
	return serverStats{calls: s.calls.since(before.calls), cpu: s.cpu - before.cpu}
}

// statsReader reads INFO commandstats and cpu from one server, one call at a time,
// and takes its own INFO calls out of the "info" count, so that what is
// left is the INFO the locks' clients sent (core reads INFO server to notice
// restarts). Every read the harness makes of that server goes through one
// statsReader.
type statsReader struct {
	rdb redis.Cmdable
	mu  sync.Mutex
	own int64 // INFO calls of ours the server has counted
}

func newStatsReader(rdb redis.Cmdable) *statsReader { return &statsReader{rdb: rdb} }

// read returns the server's command counts and CPU time now.
func (r *statsReader) read(ctx context.Context) (serverStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := readServerStats(ctx, r.rdb)
	if err != nil {
		return s, err
	}
	s.calls["info"] -= r.own // this call is counted after its reply
	r.own++
	return s, nil
}

// readServerStats reads INFO commandstats and cpu.
func readServerStats(ctx context.Context, rdb redis.Cmdable) (serverStats, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return serverStats{}, fmt.Errorf("contend: INFO commandstats cpu: %w", err)
	}
	s := serverStats{calls: commandStats{}}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "used_cpu_sys:"); ok {
			s.cpu += seconds(v)
		} else if v, ok := strings.CutPrefix(line, "used_cpu_user:"); ok {
			s.cpu += seconds(v)
		}
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		name, rest, ok := strings.Cut(line[len("cmdstat_"):], ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return s, fmt.Errorf("contend: INFO commandstats line %q: %w", line, err)
		}
		s.calls[name] = n
	}
	return s, nil
}

// seconds parses INFO's "1.234567" seconds (0 when unreadable).
func seconds(v string) time.Duration {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// since returns s − before, command by command.
func (s commandStats) since(before commandStats) commandStats {
	d := commandStats{}
	for name, n := range s {
		if n -= before[name]; n != 0 {
			d[name] = n
		}
	}
	return d
}

// sum adds up the calls of the named commands.
func (s commandStats) sum(names ...string) int64 {
	var n int64
	for _, name := range names {
		n += s[name]
	}
	return n
}

// total is every command Redis ran (scripts' inner commands included).
func (s commandStats) total() int64 {
	var n int64
	for _, c := range s {
		n += c
	}
	return n
}

// Command groups as INFO commandstats names them.
var (
	scriptCommands    = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}
	subscribeCommands = []string{"subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "psubscribe", "punsubscribe"}
	publishCommands   = []string{"publish", "spublish"}
)

// Cost is what Redis saw per unit of work (per critical section, per waiter
// served).
type Cost struct {
	// Sent is the commands the lock's clients sent: every command their
	// go-redis clients issued (counted by a hook in each process, pipelined
	// ones one by one) plus the SUBSCRIBE family, which go-redis's pub/sub
	// connections send without hooks (counted by the server).
	Sent float64
	// Scripts is EVAL/EVALSHA/FCALL calls (server-side).
	Scripts float64
	// Subscribes is SUBSCRIBE/UNSUBSCRIBE calls, sharded and pattern ones
	// included (server-side).
	Subscribes float64
	// Publishes is PUBLISH/SPUBLISH calls, from inside scripts (server-side).
	// Each is delivered to every subscribed process.
	Publishes float64
	// InRedis is every command Redis ran, scripts' inner commands included
	// (server-side).
	InRedis float64
	// Commands is InRedis by command name (server-side).
	Commands map[string]float64
	// CPU is the Redis server's CPU time (used_cpu_sys + used_cpu_user).
	CPU time.Duration
}

// top lists the n commands Redis ran most, per unit: "evalsha 4.00, hset 2.00".
func (c Cost) top(n int) string {
	names := make([]string, 0, len(c.Commands))
	for name := range c.Commands {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if a, b := c.Commands[names[i]], c.Commands[names[j]]; a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, n)
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, c.Commands[name]))
	}
	return strings.Join(parts, ", ")
}

// newCost divides what Redis saw (delta) and what the clients counted
// (hookSent) by n.
func newCost(d serverStats, hookSent int64, n int) Cost {
	if n <= 0 {
		return Cost{}
	}
	f := float64(n)
	delta := d.calls
	subs := delta.sum(subscribeCommands...)
	by := map[string]float64{}
	for name, calls := range delta {
		by[name] = float64(calls) / f
	}
	return Cost{
		CPU:        d.cpu / time.Duration(n),
		Commands:   by,
		Sent:       float64(hookSent+subs) / f,
		Scripts:    float64(delta.sum(scriptCommands...)) / f,
		Subscribes: float64(subs) / f,
		Publishes:  float64(delta.sum(publishCommands...)) / f,
		InRedis:    float64(delta.total()) / f,
	}
}

// loadAverage returns the 1-minute load average (from /proc/loadavg), or
// "?" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
