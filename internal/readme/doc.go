// Package readme keeps the project's README honest: its test compiles
// every ```go snippet of README.md, so a quick start that no longer builds
// fails `make test`. Its other tests check what the README says of FIPS
// 140-3 mode (the library packages other than asynq's and keylocktest load
// under GODEBUG=fips140=only), and that no Go or Markdown file names an
// issue or a task by a bare number.
//
// A snippet is the body of a function: it may use rdb (a *redis.Client)
// and locks (a *core.Client) without declaring them, and the packages it
// names (core, redis, ginlock, ...) are imported for it. Everything it
// declares must be used, as in any Go function.
package readme
