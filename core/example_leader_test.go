package core_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// One scheduler per cluster: every replica campaigns, the one that leads
// runs the periodic work under the term's context, and stops when that
// context ends (leadership lost) or resigns on shutdown, so the next
// replica takes over at once.
func ExampleElection() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb, core.WithIdentity(core.Identity{Service: "scheduler"}))
	defer locks.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	election := locks.Election("scheduler")
	term, err := election.Campaign(ctx) // blocks until this replica leads
	if err != nil {
		log.Fatal(err) // ctx ended (ErrLocked + ctx.Err()), or ErrUnavailable, ErrClosed
	}
	fmt.Println("leading with fencing token", term.Token())

	select {
	case <-term.Context().Done(): // lost: context.Cause says why (core.ErrLockLost)
		log.Print(context.Cause(term.Context()))
	case <-ctx.Done(): // shutting down: hand over at once
		_ = term.Resign(context.Background())
	}
}

// Who leads, pushed on every change.
func ExampleElection_Observe() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop() // ends the observer
	for ld := range locks.Election("scheduler").Observe(ctx) {
		if ld.Owner == "" {
			fmt.Println("nobody leads")
			continue
		}
		fmt.Printf("%s leads (term %d)\n", ld.Client(), ld.Token)
	}
}
