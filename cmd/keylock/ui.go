package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/dashboard"
)

// uiFlags are ui's own flags.
type uiFlags struct {
	listen            string
	longHold, refresh time.Duration
	force             bool
}

// uiFlagSet is ui's flags: where Redis is and its own. Its errors are the
// caller's to print.
func uiFlagSet(o *options, u *uiFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("keylock ui", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	connFlags(fs, o)
	fs.StringVar(&u.listen, "listen", "127.0.0.1:8090", "address to serve the dashboard on")
	fs.DurationVar(&u.longHold, "long-hold", 0, "highlight holds older than this (0: none)")
	fs.DurationVar(&u.refresh, "refresh", 500*time.Millisecond, "how often an open page refreshes")
	fs.BoolVar(&u.force, "force-unlock", false, "offer force-unlock to loopback clients (needs a loopback -listen)")
	return fs
}

// ui serves the dashboard on -listen until ctx ends; it returns the exit
// status. Its flags follow the command: its own and those saying where
// Redis is (which may also come before it).
func ui(ctx context.Context, o options, args []string, stdout, stderr io.Writer) int {
	var u uiFlags
	pos, err := parseInterleaved(uiFlagSet(&o, &u), args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			d, du := defaultOptions(), uiFlags{}
			uiCommand.usage(stdout, uiFlagSet(&d, &du))
			return exitOK
		}
		return badUsage(stderr, uiCommand, err)
	}
	if len(pos) != 0 {
		return badUsage(stderr, uiCommand, fmt.Errorf("unexpected arguments %q", pos))
	}
	listen, longHold, refresh, force := &u.listen, &u.longHold, &u.refresh, &u.force
	if o.redis == "" {
		o.redis = defaultRedis()
	}
	if o.timeout <= 0 {
		return badUsage(stderr, uiCommand, errors.New("-timeout must be positive"))
	}
	if *force && !loopback(*listen) {
		return badUsage(stderr, uiCommand, fmt.Errorf("-force-unlock needs a loopback -listen address, got %q", *listen))
	}

	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	rdb, err := connect(cctx, o)
	cancel()
	if err != nil {
		printError(stderr, "", err)
		if isUsage(err) {
			return exitUsage
		}
		return exitError
	}
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	opts := []dashboard.Option{
		dashboard.WithLongHold(*longHold), dashboard.WithRefresh(*refresh),
		dashboard.WithTimeout(o.timeout), dashboard.WithTitle("keylock · " + o.target()),
	}
	if *force {
		opts = append(opts, dashboard.WithForceUnlock(func(r *http.Request) bool {
			return loopback(r.RemoteAddr) && loopbackName(r.Host)
		}))
	}
	h, err := dashboard.New(locks, opts...)
	if err != nil {
		printError(stderr, "ui", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		printError(stderr, "ui", err)
		return exitError
	}
	var handler http.Handler = h
	if loopback(*listen) {
		handler = loopbackOnly(h)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "keylock: dashboard of %s on http://%s/ — Ctrl-C to stop\n", o.target(), ln.Addr())

	select {
	case err = <-served:
	case <-ctx.Done():
		// Requests in flight end within their -timeout.
		sctx, cancel := context.WithTimeout(context.Background(), max(5*time.Second, o.timeout+time.Second))
		err = srv.Shutdown(sctx)
		cancel()
		<-served
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		printError(stderr, "ui", err)
		return exitError
	}
	return exitOK
}

// loopback reports whether a host:port names a loopback address.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	return err == nil && loopbackHost(host)
}

// loopbackName reports whether a request's Host header (host, or
// host:port) names localhost or a loopback IP.
func loopbackName(hostHeader string) bool {
	if host, _, err := net.SplitHostPort(hostHeader); err == nil {
		return loopbackHost(host)
	}
	return loopbackHost(strings.TrimSuffix(strings.TrimPrefix(hostHeader, "["), "]"))
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackOnly refuses (421) a request whose Host header is not a loopback
// name. A page whose own name an attacker points at 127.0.0.1 (DNS
// rebinding) is same-origin with the dashboard and reaches it from a
// loopback client, so neither the browser's origin checks nor the client
// address stop it; its Host header still carries that name.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackName(r.Host) {
			http.Error(w, fmt.Sprintf("keylock ui answers requests to localhost or a loopback address only, not to Host %q", r.Host),
				http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}
