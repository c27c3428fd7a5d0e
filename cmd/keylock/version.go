package main

// version is what keylock -version prints: keylock's release version, the
// newest release in CHANGELOG.md (a test checks that they match).
const version = "0.1.0"
