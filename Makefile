# keylock — make test installs what the tests need (redis-server) and runs
# vet + the race-enabled test suite; make bench runs the benchmarks.

GO ?= go
BENCHTIME ?= 2s

.PHONY: test vet lint redis chromium bench fuzz chaos contend model tidy

# Every package of every module: the repository is a workspace (go.work) of
# the core module and the modules of the adapters, tracing, the dashboard,
# the CLI and the example, and ./... would name the core module's only.
ALL := github.com/keylock/keylock/...

# The multi-process suites (the fault suite's short run, the contention
# harness's smoke run) load every core of the machine: they run after the
# rest, one at a time, so they do not skew the timing of the engine's tests.
SOLO := github.com/keylock/keylock/internal/chaos github.com/keylock/keylock/internal/contend

# The engine's and the idempotency middleware's tests run in FIPS 140-3
# mode (GODEBUG=fips140=only: a non-approved algorithm such as SHA-1
# panics), so that importing them and running their scripts stays possible
# there; what they check does not depend on the mode, so they run once, in
# it. Every other library package is checked to load in that mode by
# internal/readme's TestLibrariesLoadInFIPSMode (a program importing them,
# and keylock -h, run under GODEBUG=fips140=only), part of the first run;
# the asynq packages, the seckill example and keylocktest do not run in it
# (asynq and miniredis hash scripts with SHA-1).
ENGINE := github.com/keylock/keylock/core github.com/keylock/keylock/middleware/idempotency
# The engine's long waiting tests (t.Parallel, see core/helpers_test.go) run
# four at a time: they sleep through claim windows, partitions and leases,
# and two at a time (GOMAXPROCS here) left the run near 15 minutes.

# The engine's tests of every kind, renewals and handoffs run once more
# behind a sharding proxy that refuses commands whose keys span hash slots
# (KEYLOCK_TEST_PROXY=crossslot, see core/helpers_test.go; about 2 minutes).
# TestMultiLockAllOrNothing is left out: it checks four locks with one
# EXISTS of its own, which such a proxy refuses.
PROXIED := ^Test(Mutex|FairLock|FairGrant|FairWaiter|RW|Semaphore|MultiLock|Watchdog|FixedLease|Loss|MixedLeases|DeadlinesKept|RenewNow|KeptPlace|Waiter(WokenByRelease|AcquiresWhenWakeUpIsLost)|ReleaseWakes|Extend|LineGone)
PROXIED_SKIP := ^TestMultiLockAllOrNothing$$

test: redis chromium vet
	$(GO) test -race -count=1 -timeout 30m $$($(GO) list $(ALL) | grep -v -x -F $(foreach p,$(SOLO) $(ENGINE),-e $(p)))
	GODEBUG=fips140=only $(GO) test -race -count=1 -timeout 30m -parallel 4 $(ENGINE)
	GODEBUG=fips140=only KEYLOCK_TEST_PROXY=crossslot $(GO) test -count=1 -timeout 10m -parallel 4 -run '$(PROXIED)' -skip '$(PROXIED_SKIP)' github.com/keylock/keylock/core
	$(GO) test -race -count=1 -timeout 20m -p 1 $(SOLO)

vet:
	$(GO) vet $(ALL)

# lint: staticcheck on every package. Not part of make test: its first run
# downloads and builds it (a minute or two).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) $(ALL)

# tidy: go mod tidy in every module (each on its own: GOWORK=off, the
# replace directives point at the repository's other modules).
tidy:
	@for m in $$(find . -name go.mod -not -path './internal/readme/testdata/*' -exec dirname {} \; | sort); do \
		echo "go mod tidy: $$m"; (cd $$m && GOWORK=off $(GO) mod tidy) || exit 1; \
	done

# redis: make sure redis-server and redis-cli (for the cluster tests) are on PATH.
redis:
	@if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then \
		echo "redis: $$(redis-server --version)"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "redis: installing redis-server with apt-get"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null) || \
			{ echo "redis: apt-get install redis-server failed" >&2; exit 1; }; \
	elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then \
		echo "redis: installing redis-server with sudo apt-get"; \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	else \
		echo "redis-server is not installed. Install Redis >= 6.2 (redis-server and redis-cli on PATH):" >&2; \
		echo "  Debian/Ubuntu: sudo apt-get install redis-server" >&2; \
		echo "  macOS:         brew install redis" >&2; \
		echo "or point the single-node tests at a server with REDIS_ADDR=host:port" >&2; \
		exit 1; \
	fi

# chromium: the dashboard's browser tests drive headless Chromium; without
# it they fail, unless KEYLOCK_NO_BROWSER=1 says to skip them.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then \
		echo "chromium: found"; \
	elif [ "$$KEYLOCK_NO_BROWSER" = 1 ]; then \
		echo "chromium: not installed; KEYLOCK_NO_BROWSER=1: the browser tests are skipped"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "chromium: installing chromium with apt-get"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
			{ echo "chromium: apt-get install chromium failed" >&2; exit 1; }; \
	elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then \
		echo "chromium: installing chromium with sudo apt-get"; \
		sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
		echo "Chromium is not installed: the dashboard's browser tests need it." >&2; \
		echo "  Debian/Ubuntu: sudo apt-get install chromium" >&2; \
		echo "  or set KEYLOCK_CHROMIUM=/path/to/chrome, or KEYLOCK_NO_BROWSER=1 to skip those tests" >&2; \
		exit 1; \
	fi

bench: redis
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m $(ALL)

fuzz:
	$(GO) test ./keytmpl -run '^$$' -fuzz FuzzTemplateRender -fuzztime 30s

# chaos: the fault suite (internal/chaos). Worker processes loop on every
# lock kind through fault proxies while latency, spikes, resets, partitions,
# kill -9, SIGSTOP and empty Redis restarts are injected; the checker then
# reads their logs. A short run is part of `make test`.
# The workers are built with the race detector unless CHAOSGOFLAGS says
# otherwise; CHAOSFLAGS passes flags (-workers, -seed, -faults, -dir).
DURATION ?= 10m
CHAOSGOFLAGS ?= -race
CHAOSFLAGS ?=
chaos: redis
	$(GO) run $(CHAOSGOFLAGS) ./internal/chaos/cmd/chaos -duration $(DURATION) $(CHAOSFLAGS)

# model: the model-based randomized test (internal/model) for DURATION,
# one seed after another (a short run of it is part of `make test`).
# MODELFLAGS e.g. "-model.seed 42 -model.steps 1000 -model.all", or
# "-model.trace /tmp/model-trace.txt" (a failing seed's every step).
MODELFLAGS ?=
model: redis
	$(GO) test -race -count=1 -timeout 0 -run '^TestModel$$' -v ./internal/model -args -model.duration $(DURATION) $(MODELFLAGS)

# contend: the contention harness (internal/contend): 8 processes
# on one key (bare SET NX poll loop, a push-handoff floor with no
# guarantees, Mutex, FairMutex), the same on one
# semaphore of 3 permits (bare ZSET poll loop, Semaphore) and on one
# read-write lock with one write in 4 (bare ZSET RW poll loop, RWMutex),
# handoff latency, 10,000 waiters, then uncontended Lock+Unlock beside the
# bare lock. A few minutes; a short run is part of `make test`.
# CONTENDFLAGS e.g. "-contend.procs 4 -contend.duration 5s",
# "-contend.permits 2", or "-contend.kinds baresem,semaphore" for the
# semaphore run alone ("barerw,rw" for the read-write run);
# "-contend.alone" sends every call of every Client in a round trip of its
# own (core.WithSharedRoundTrips(0)), in the uncontended benchmark too.
CONTENDFLAGS ?=
contend: redis
	$(GO) test -count=1 -timeout 60m -run '^TestContention$$' -v ./internal/contend -args -contend.full $(CONTENDFLAGS)
	$(GO) test -count=1 -run '^$$' -bench Uncontended -benchtime $(BENCHTIME) ./internal/contend -args $(CONTENDFLAGS)

# loopbench: the adapters' overhead (middleware/internal/loopbench): gin,
# net/http and gRPC servers in a process of their own on a redis-server it
# starts, each route served without a lock, with a lock taken by hand and
# with the adapter's, driven with 1 and 16 connections beside core's bare
# Lock+Unlock; prints p50/p99 per target (about 3 minutes). A short run is
# part of `make test`. LOOPBENCHFLAGS e.g. "-loopbench.conns 1,4
# -loopbench.profile /tmp/prof".
LOOPBENCHFLAGS ?=
.PHONY: loopbench
loopbench: redis
	$(GO) test -count=1 -timeout 30m -v -run '^TestOverhead$$' ./middleware/internal/loopbench -args -loopbench.full $(LOOPBENCHFLAGS)

# leader: the leader-election harness (jobs/internal/leaderrun): three
# replica processes campaign for one core.Election on a redis-server it
# starts, the leader enqueues one asynq task per second (the second is its
# TaskID); the leader is stopped with SIGTERM once and killed once. Prints
# ticks, duplicates and takeover gaps; exits 1 when a bound is broken.
# LEADERFLAGS e.g. "-duration 120s -lease 10s".
LEADERFLAGS ?=
.PHONY: leader
leader: redis
	$(GO) run ./jobs/internal/leaderrun $(LEADERFLAGS)
