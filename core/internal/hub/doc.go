// Package hub is a keylock Client's pub/sub hub: every wait of the Client
// shares its connections (one plain, or one per hash slot with sharded
// pub/sub), a wake-up wakes the local waiters it is for and no more, and a
// push for one attempt (a grant, a wake-up, the next-in-line notice:
// push.go) reaches that attempt's waiter. The hub follows the master behind
// a Sentinel (master.go) and a slot that migrates on a Cluster (slot.go).
//
// It is an engine component of package core and depends on nothing of it:
// core hands it the go-redis client, the Client's WaitGroup, its key prefix
// and its closed error (New).
package hub
