package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/internal/chaos/event"
)

// failover is the FaultFailover fault: the replica takes over from the
// master, the way Sentinel or a managed endpoint does it, and the workers'
// proxies move to it as a virtual IP would (every open connection is
// reset; go-redis dials again and lands on the new master).
//
// Half of them are planned: writes are paused on the master (CLIENT PAUSE
// WRITE) until the replica has received everything, as SENTINEL FAILOVER
// does, so no lock is lost and any overlap of two holders is a finding.
// The others are crashes: whatever the replica had not yet received is
// lost, which the checker treats like an empty restart (a Restart record).
// Either way the old master's port then gets a new, empty server that
// replicates from the new master, ready for the next failover.
func (d *driver) failover(ctx context.Context) string {
	master, replica := d.redis, d.replica
	planned := d.rng.IntN(2) == 0
	caughtUp := false
	if planned {
		var err error
		if caughtUp, err = pauseUntilReplicated(ctx, master.Addr(), replica.Addr()); err != nil {
			d.progress("failover: pause: %v", err)
		}
	}
	rs := event.Record{Ev: event.Restart, Fault: event.FaultFailover, T0: event.Now()}
	master.kill()
	if err := promote(ctx, replica.Addr()); err != nil {
		d.progress("failover: promotion failed: %v", err)
	}
	rs.Start = event.Now()
	replica.replicaOf = ""
	for _, p := range d.proxies {
		p.Retarget(replica.Addr())
	}
	rs.T1 = event.Now()
	if !caughtUp {
		// The replica may have missed the last writes: locks may be lost.
		d.record(rs)
	}
	d.redis, d.replica = replica, master

	master.replicaOf = replica.Addr()
	var restartErr error
	for range 20 {
		if restartErr = master.start(); restartErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	what := "crash"
	switch {
	case caughtUp:
		what = "planned (writes paused until the replica had them)"
	case planned:
		what = "planned, but the replica did not catch up: counted as a crash"
	}
	took := time.Duration(rs.T1 - rs.T0).Round(time.Millisecond)
	if restartErr != nil {
		return fmt.Sprintf("%s failover to port %d in %v; new replica FAILED: %v", what, replica.port, took, restartErr)
	}
	return fmt.Sprintf("%s failover to port %d in %v", what, replica.port, took)
}

// pauseUntilReplicated pauses writes on the master and waits until the
// replica has processed the master's whole replication stream. It reports
// whether it did within 3s (the pause outlasts the kill that follows).
func pauseUntilReplicated(ctx context.Context, masterAddr, replicaAddr string) (bool, error) {
	opt := func(addr string) *redis.Options {
		return &redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: time.Second, PoolSize: 1}
	}
	m, r := redis.NewClient(opt(masterAddr)), redis.NewClient(opt(replicaAddr))
	defer m.Close()
	defer r.Close()
	if err := m.Do(ctx, "CLIENT", "PAUSE", "10000", "WRITE").Err(); err != nil {
		return false, err
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		mi, err1 := m.Info(ctx, "replication").Result()
		ri, err2 := r.Info(ctx, "replication").Result()
		if err1 == nil && err2 == nil && infoField(ri, "master_link_status") == "up" {
			mo, err1 := strconv.ParseInt(infoField(mi, "master_repl_offset"), 10, 64)
			ro, err2 := strconv.ParseInt(infoField(ri, "slave_repl_offset"), 10, 64)
			if err1 == nil && err2 == nil && ro >= mo {
				return true, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false, nil
}

// infoField returns one field of an INFO reply, "" if it is not there.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// promote makes the server at addr a master (REPLICAOF NO ONE).
func promote(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	var err error
	for range 10 {
		if err = c.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
