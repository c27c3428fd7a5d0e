// Package script holds the lock engine's Lua scripts and runs them: one
// embedded file per script (lua/*.lua), one [Script] per file, and the
// per-go-redis-client [Cache] of the SHAs servers gave for them.
//
// # Conventions of the scripts
//
// Every script opens with a header saying what each KEYS and ARGV entry
// means, what it returns and why. All keys of a call carry the lock's
// {name} hash tag (channels too are passed in KEYS), so a script runs on
// one Redis Cluster slot.
//
// The lib_*.lua files are not scripts of their own: they are local helper
// functions several scripts share (the fencing-token counter, the hold,
// the line, the attempt records). [Register] links the libraries a
// script names into its body, so each script stays one self-contained
// EVAL; of a library it keeps only the helpers the script uses (link.go),
// since Redis builds every helper a body defines on each call. A script
// whose first part answers the common case (the uncontended acquire, a
// release nobody waits for) ends that part with a line opening
// "-- @helpers": the helpers only the rest needs are linked there, and a
// call that part answers never builds them.
//
// Acquisitions and releases are idempotent (lib_attempt.lua): every
// attempt has an id whose record key a replayed copy of the call finds, and
// answers the first reply with, changing nothing; a release leaves a
// receipt that a retry answers from. A script call whose reply was lost can
// therefore be sent again.
//
// # How scripts are run
//
// Nothing in this process hashes a script: SHA-1 is not an approved
// algorithm in FIPS 140-3 mode (with GODEBUG=fips140=only, crypto/sha1
// panics), and go-redis's redis.NewScript computes one. Instead each go-redis
// client's [Cache] keeps the SHAs the server answers to SCRIPT LOAD (the same
// for a body on every server, so one per script, whichever node answered).
// A call then goes:
//
//   - SHA known: EVALSHA; on NOSCRIPT (a restart, SCRIPT FLUSH, a node that
//     never loaded it) the same call once more as EVAL, with the body;
//   - SHA not known yet (SCRIPT LOAD not answered): EVAL;
//   - the server refused SCRIPT LOAD (some proxies refuse SCRIPT): EVAL from
//     then on, and SCRIPT LOAD is not sent again.
//
// A core Client loads every script before its first acquisition
// ([Cache.Load]) and again when a renewal meets NOSCRIPT, and reports a
// refusal once to its observer. The replies are decoded by package reply.
package script
