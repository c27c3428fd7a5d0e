package tracing

// Version is the version of this instrumentation, recorded as the scope
// version of its spans and metrics. It is keylock's release version: the
// newest release in CHANGELOG.md (a test checks that they match).
const Version = "0.1.0"
