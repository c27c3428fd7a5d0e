package loopbench_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/middleware/internal/loopbench"
)

var (
	full     = flag.Bool("loopbench.full", false, "the full run: 1 and 16 connections, 200 ms per target and round, 25 rounds")
	connsF   = flag.String("loopbench.conns", "", "connections per target, comma-separated (default 1,4; full: 1,16)")
	duration = flag.Duration("loopbench.duration", 0, "time per target and round (default 150ms; full: 200ms)")
	rounds   = flag.Int("loopbench.rounds", 0, "rounds, each target once per round (default 1; full: 25)")
	only     = flag.String("loopbench.only", "", "measure only the targets matching this regexp (e.g. 'gin|lock')")
	profile  = flag.String("loopbench.profile", "", "write the server process's CPU and allocation profiles to this directory")
)

// The server process: the test binary again, with serverEnv set to the
// Redis address.
const (
	serverEnv  = "LOOPBENCH_REDIS"
	profileEnv = "LOOPBENCH_PROFILE"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(serverEnv); addr != "" {
		if err := serve(addr, os.Getenv(profileEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "loopbench server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serve runs the servers, prints their addresses as one JSON line, and
// stops when stdin ends, writing the profiles to dir if it is set.
func serve(redisAddr, dir string) error {
	a, stop, err := loopbench.Serve(redisAddr)
	if err != nil {
		return err
	}
	defer stop()
	if dir != "" {
		f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
		if err != nil {
			return err
		}
		defer f.Close()
		runtime.MemProfileRate = 4096
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
		defer func() {
			if f, err := os.Create(filepath.Join(dir, "allocs.pprof")); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	if err := json.NewEncoder(os.Stdout).Encode(a); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// startServer starts the server process on the Redis at redisAddr and
// returns its addresses and its pid.
func startServer(t *testing.T, redisAddr string) (loopbench.Addrs, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverEnv+"="+redisAddr, profileEnv+"="+*profile)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("server process: %v", err)
		}
	})
	var a loopbench.Addrs
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &a)
	}
	if err != nil {
		t.Fatalf("server process: no addresses: %v", err)
	}
	return a, cmd.Process.Pid
}

// TestOverhead measures, at each number of connections, every route and
// method without and with its lock and the bare Lock+Unlock, one target
// after another in each round, and prints a Markdown table of p50 and p99.
// Without -loopbench.full it is a short run that checks only that every
// target answered.
func TestOverhead(t *testing.T) {
	conns, d, nRounds := []int{1, 4}, 150*time.Millisecond, 1
	if *full {
		conns, d, nRounds = []int{1, 16}, 200*time.Millisecond, 25
	}
	if *connsF != "" {
		conns = nil
		for _, s := range strings.Split(*connsF, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				t.Fatalf("-loopbench.conns: %q is not a positive number", s)
			}
			conns = append(conns, n)
		}
	}
	if *duration > 0 {
		d = *duration
	}
	if *rounds > 0 {
		nRounds = *rounds
	}
	keep := regexp.MustCompile(*only)

	srv := redistest.NewServer(t)
	a, pid := startServer(t, srv.Addr())
	targets, closeTargets := loopbench.Targets(a, srv.Addr())
	defer closeTargets()

	lat := map[string][]time.Duration{} // by conns/target
	cpu := map[string]time.Duration{}   // the server's CPU time, by conns/target
	cpuKnown := true
	for _, n := range conns {
		for range nRounds {
			for _, tg := range targets {
				if !keep.MatchString(tg.Name) {
					continue
				}
				before, err1 := loopbench.ProcessCPU(pid)
				l, err := loopbench.Run(tg, n, d)
				if err != nil {
					t.Fatalf("%d connections: %v", n, err)
				}
				after, err2 := loopbench.ProcessCPU(pid)
				cpuKnown = cpuKnown && err1 == nil && err2 == nil
				k := strconv.Itoa(n) + "/" + tg.Name
				lat[k] = append(lat[k], l...)
				cpu[k] += after - before
			}
		}
	}
	sum := map[string]loopbench.Summary{}
	for k, l := range lat {
		if len(l) == 0 {
			t.Errorf("%s: no operation completed", k)
		}
		s := loopbench.Summarize(l, time.Duration(nRounds)*d)
		if cpuKnown && len(l) > 0 {
			s.CPU = cpu[k] / time.Duration(len(l))
		}
		sum[k] = s
	}
	report(os.Stdout, conns, sum)
}

// report prints one row per adapter and number of connections: p50 / p99
// of each target, and the two differences the adapters are judged by.
func report(w io.Writer, conns []int, sum map[string]loopbench.Summary) {
	us := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Nanoseconds())/1e3, 'f', 0, 64) }
	cell := func(s loopbench.Summary) string { return us(s.P50) + " / " + us(s.P99) }
	fmt.Fprintln(w, "| conns | adapter | unlocked | lock by hand | adapter's lock | bare Lock+Unlock | locked − unlocked − bare, p50 | **locked − by hand, p50** | server CPU per request: unlocked / by hand / locked | locked req/s |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, n := range conns {
		p := strconv.Itoa(n) + "/"
		bare := sum[p+"lock+unlock"]
		for _, ad := range []string{"gin", "http", "grpc"} {
			un, hand, lk := sum[p+ad+"/unlocked"], sum[p+ad+"/hand"], sum[p+ad+"/locked"]
			if un.N == 0 || hand.N == 0 || lk.N == 0 || bare.N == 0 {
				continue
			}
			cpu := "–"
			if lk.CPU > 0 {
				cpu = us(un.CPU) + " / " + us(hand.CPU) + " / " + us(lk.CPU)
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | **%s** | %s | %.0f |\n", n, ad,
				cell(un), cell(hand), cell(lk), cell(bare), us(lk.P50-un.P50-bare.P50), us(lk.P50-hand.P50), cpu, lk.PerSec)
		}
	}
	fmt.Fprintln(w, "\n(µs; each cell p50 / p99)")
}
