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

const uiUsage = `usage:
  keylock ui [-redis ADDR|URL] [-listen 127.0.0.1:8090] [-long-hold 30s] [-refresh 500ms] [-force-unlock]

Serves the lock dashboard (package dashboard) until Ctrl-C. It is read-only
unless -force-unlock is given, which needs a loopback -listen address and
accepts force-unlocks only from loopback clients. On a loopback -listen
address it answers only requests addressed to localhost or a loopback IP
(the Host header), so that a web page cannot reach it by pointing its own
name at 127.0.0.1.

flags:
`

// ui serves the dashboard on -listen until ctx ends; it returns the exit
// status. Its flags follow the command: its own and those saying where
// Redis is (which may also come before it).
func ui(ctx context.Context, o options, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keylock ui", flag.ContinueOnError)
	fs.SetOutput(stderr)
	connFlags(fs, &o)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve the dashboard on")
	longHold := fs.Duration("long-hold", 0, "highlight holds older than this (0: none)")
	refresh := fs.Duration("refresh", 500*time.Millisecond, "how often an open page refreshes")
	force := fs.Bool("force-unlock", false, "offer force-unlock to loopback clients (needs a loopback -listen)")
	fs.Usage = func() {
		fmt.Fprint(stderr, uiUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "keylock: ui: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return exitUsage
	}
	if o.redis == "" {
		o.redis = defaultRedis()
	}
	if o.timeout <= 0 {
		fmt.Fprintln(stderr, "keylock: ui: -timeout must be positive")
		return exitUsage
	}
	if *force && !loopback(*listen) {
		fmt.Fprintf(stderr, "keylock: ui: -force-unlock needs a loopback -listen address, got %q\n", *listen)
		return exitUsage
	}

	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	rdb, err := connect(cctx, o)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "keylock: %v\n", err)
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
		fmt.Fprintf(stderr, "keylock: ui: %v\n", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "keylock: ui: %v\n", err)
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
		fmt.Fprintf(stderr, "keylock: ui: %v\n", err)
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
