package redistest

// ServerOption configures a server started by [NewServer] or [NewServers].
type ServerOption func(*serverConfig)

// serverConfig is what ServerOptions set. The zero value is the default.
type serverConfig struct {
	// args are extra redis-server arguments, after the harness's own.
	args []string
	// cluster starts the node with cluster mode on (set by NewCluster only).
	cluster bool
}

// WithArgs appends extra redis-server command-line arguments, such as
// WithArgs("--maxmemory", "10mb"). They come after the harness's own
// arguments, so they override them. Default: none.
// WithArgs has no effect on an external server (REDIS_ADDR).
func WithArgs(args ...string) ServerOption {
	return func(c *serverConfig) {
		c.args = append(c.args, args...)
	}
}

func newServerConfig(opts []ServerOption) serverConfig {
	var c serverConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}
