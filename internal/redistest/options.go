package redistest

// ServerOption configures a server started by [NewServer] or [NewServers].
type ServerOption func(*serverConfig)

// serverConfig is what ServerOptions set. The zero value is the default.
type serverConfig struct {
	// args are extra redis-server arguments, after the harness's own.
	args []string
	// cluster starts the node with cluster mode on (set by NewCluster only).
	cluster bool
	// tls, when set, makes the server serve TLS too (WithTLS).
	tls *tlsFiles
}

// tlsFiles are the PEM files of a server that serves TLS.
type tlsFiles struct{ cert, key, ca string }

// WithArgs appends extra redis-server command-line arguments, such as
// WithArgs("--maxmemory", "10mb"). They come after the harness's own
// arguments, so they override them. Default: none.
// WithArgs has no effect on an external server (REDIS_ADDR).
func WithArgs(args ...string) ServerOption {
	return func(c *serverConfig) {
		c.args = append(c.args, args...)
	}
}

// WithTLS makes the server accept TLS connections as well, on a free port
// of their own ([Server.TLSAddr]), with the certificate and key in the PEM
// files cert and key; clients' certificates are not required (ca names the
// PEM file of the authority it would check them against). The port is
// chosen with the server's own, and a clash on either is retried the same
// way. Default: no TLS. WithTLS has no effect on an external server
// (REDIS_ADDR), whose TLSAddr is "".
func WithTLS(cert, key, ca string) ServerOption {
	return func(c *serverConfig) {
		c.tls = &tlsFiles{cert: cert, key: key, ca: ca}
	}
}

func newServerConfig(opts []ServerOption) serverConfig {
	var c serverConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}
