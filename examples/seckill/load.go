package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/keylock/keylock/examples/seckill/internal/loadgen"
)

// loadConfig configures runLoad.
type loadConfig struct {
	// URL is the HTTP API to load ("http://host:port") and GRPCAddr the
	// gRPC one. With both empty, runLoad starts its own server (App).
	URL      string
	GRPCAddr string
	// GRPC buys through gRPC instead of HTTP (and reads back through it).
	GRPC bool
	// Gen is the load; its Target is filled in by runLoad.
	Gen loadgen.Config
	// App configures the in-process server when there is no URL/GRPCAddr.
	App appConfig
	// Log receives what runLoad does (the in-process server's address);
	// nil means io.Discard.
	Log io.Writer
}

// runLoad runs the load generator: against URL/GRPCAddr, or against a
// server it starts in-process (on free loopback ports) and stops when done.
// It returns the report; whether the invariants held is report.OK().
func runLoad(ctx context.Context, cfg loadConfig) (*loadgen.Report, error) {
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	if cfg.URL == "" && cfg.GRPCAddr == "" {
		appCtx, stop := context.WithCancel(ctx)
		ready := make(chan appAddrs, 1)
		appErr := make(chan error, 1)
		app := cfg.App
		app.HTTPAddr, app.GRPCAddr, app.Quiet = "127.0.0.1:0", "127.0.0.1:0", true
		app.Ready = func(a appAddrs) { ready <- a }
		go func() { appErr <- runApp(appCtx, app) }()
		defer func() {
			stop()
			<-appErr
		}()
		select {
		case a := <-ready:
			cfg.URL, cfg.GRPCAddr = "http://"+a.HTTP, a.GRPC
			redis := "redis at " + a.Redis
			if a.Embedded {
				redis = "embedded miniredis"
			}
			mode := ""
			if app.Unsafe {
				mode = ", UNSAFE mode"
			}
			fmt.Fprintf(log, "started an in-process seckill server: HTTP %s, gRPC %s, %s, item %s with %d units%s\n",
				cfg.URL, cfg.GRPCAddr, redis, demoItem, app.Stock, mode)
		case err := <-appErr:
			appErr <- err // for the deferred wait
			return nil, fmt.Errorf("in-process server: %w", err)
		}
	}

	var target loadgen.Target
	var err error
	switch {
	case cfg.GRPC && cfg.GRPCAddr == "":
		return nil, errors.New("-grpc needs -grpc-addr (or no -url, to start a server in-process)")
	case cfg.GRPC:
		target, err = loadgen.NewGRPC(cfg.GRPCAddr)
	case cfg.URL == "":
		return nil, errors.New("-grpc-addr without -grpc: give -url for HTTP, or add -grpc")
	default:
		target, err = loadgen.NewHTTP(cfg.URL, max(cfg.Gen.Concurrency, 200))
	}
	if err != nil {
		return nil, err
	}
	defer target.Close()
	gen := cfg.Gen
	gen.Target = target
	return loadgen.Run(ctx, gen)
}
