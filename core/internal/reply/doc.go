// Package reply decodes the replies of the lock engine's Lua scripts
// (package script) into plain Go values. Each script's header (in
// core/internal/script/lua) says what it returns; this package turns that
// into numbers, flags and durations — and, for inspection and
// force-unlock, into a [Snapshot] of what a lock's keys held — in one
// place.
//
// Scripts return integers, as integers or as strings, and arrays of them;
// a reply of an unexpected shape is an error, never a guess. What a reply
// means for a lock — which status is an error of the engine's, what a
// lease or a hold becomes — is decided by package core: a decoder reports
// the status (an attempt over, a semaphore too small) and core builds the
// error.
package reply
