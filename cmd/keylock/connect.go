package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// connect opens a client for the target the flags name and checks that it
// is a master that answers: -sentinel/-master or a Sentinel URL open a
// failover client for the master the sentinels name; a single address whose
// server reports cluster_enabled:1 is reopened as a cluster client seeded
// with it (same credentials and TLS); any other single address must be a
// master (a replica or a sentinel is refused with a message that says what
// to give instead).
func connect(ctx context.Context, o options) (redis.UniversalClient, error) {
	spec := strings.TrimSpace(o.redis)
	if o.sentinels != "" || o.master != "" {
		return connectSentinel(ctx, o)
	}
	if sentinelURL(spec) {
		return connectSentinel(ctx, o)
	}
	var opt *redis.Options
	var seeds []string
	switch {
	case strings.Contains(spec, "://"):
		var err error
		if opt, err = redis.ParseURL(spec); err != nil {
			return nil, badURL(spec, err)
		}
	case strings.Contains(spec, ","):
		seeds = strings.Split(spec, ",")
		opt = &redis.Options{Addr: seeds[0]}
	case spec == "":
		return nil, errUsage("-redis: empty address")
	default:
		opt = &redis.Options{Addr: spec}
	}
	if err := tlsOptions(&opt.TLSConfig, o); err != nil {
		return nil, err
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = o.timeout, o.timeout, o.timeout
	opt.MaxRetries = 1
	where := redact(spec)

	if seeds == nil {
		rdb := redis.NewClient(opt)
		cluster, err := checkNode(ctx, o, rdb, where)
		if err != nil {
			_ = rdb.Close()
			return nil, err
		}
		if !cluster {
			return rdb, nil
		}
		_ = rdb.Close()
		seeds = []string{opt.Addr}
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        seeds,
		Username:     opt.Username,
		Password:     opt.Password,
		TLSConfig:    opt.TLSConfig,
		DialTimeout:  opt.DialTimeout,
		ReadTimeout:  opt.ReadTimeout,
		WriteTimeout: opt.WriteTimeout,
		MaxRetries:   opt.MaxRetries,
	})
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		_ = cc.Close()
		return nil, fmt.Errorf("cannot reach the Redis Cluster at %s: %w", where, err)
	}
	return cc, nil
}

// checkNode checks the one server rdb talks to: that it answers (else
// "cannot reach Redis"), whether it is a cluster node, and that it is a
// master. A server that refuses INFO is taken for a single node; one that
// refuses both ROLE and INFO cannot be checked, which is said on stderr.
func checkNode(ctx context.Context, o options, rdb *redis.Client, where string) (cluster bool, err error) {
	if err := rdb.Ping(ctx).Err(); err != nil {
		return false, fmt.Errorf("cannot reach Redis at %s: %w", where, err)
	}
	info, infoErr := rdb.Info(ctx, "cluster", "replication").Result()
	if infoErr != nil && !isRefusal(infoErr) {
		return false, fmt.Errorf("cannot reach Redis at %s: %w", where, infoErr)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return true, nil // a cluster client routes to the masters itself
	}
	role, master, roleErr := serverRole(ctx, rdb)
	switch {
	case roleErr != nil && !isRefusal(roleErr):
		return false, fmt.Errorf("cannot reach Redis at %s: %w", where, roleErr)
	case roleErr != nil && infoErr == nil:
		role, master = infoRole(info)
	case roleErr != nil:
		o.warnf("could not check that %s is a master: it refused ROLE (%v) and INFO (%v)", where, roleErr, infoErr)
		return false, nil
	}
	switch role {
	case "master", "":
		return false, nil
	case "slave", "replica":
		if master != "" {
			master = " of " + master
		}
		return false, fmt.Errorf("%s is a replica%s: keylock reads and frees locks on the master; give -redis the master's address, or -sentinel ADDRS -master NAME to follow failovers", where, master)
	case "sentinel":
		names := sentinelMasters(rdb.Do(ctx, "SENTINEL", "MASTERS").Slice())
		return false, fmt.Errorf("%s is a Redis Sentinel, not a data node: give -sentinel %s -master NAME%s", where, where, names)
	}
	return false, fmt.Errorf("%s has role %q; keylock needs a master", where, role)
}

// serverRole asks ROLE: the server's role and, for a replica, its master.
func serverRole(ctx context.Context, rdb redis.UniversalClient) (role, master string, err error) {
	v, err := rdb.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", "", err
	}
	if len(v) == 0 {
		return "", "", fmt.Errorf("empty ROLE reply")
	}
	role, _ = v[0].(string)
	if (role == "slave" || role == "replica") && len(v) >= 3 {
		master = fmt.Sprintf("%v:%v", v[1], v[2])
	}
	return role, master, nil
}

// infoRole reads the role from INFO replication (role:, master_host:,
// master_port:), for servers that refuse ROLE.
func infoRole(info string) (role, master string) {
	var host, port string
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			role = v
		case "master_host":
			host = v
		case "master_port":
			port = v
		}
	}
	if host != "" {
		master = host + ":" + port
	}
	return role, master
}

// sentinelMasters lists the masters in a SENTINEL MASTERS reply, as a hint.
func sentinelMasters(v []any, err error) string {
	if err != nil || len(v) == 0 {
		return ""
	}
	var names []string
	for _, m := range v {
		switch m := m.(type) {
		case []any:
			for i := 0; i+1 < len(m); i += 2 {
				if m[i] == "name" {
					names = append(names, fmt.Sprint(m[i+1]))
				}
			}
		case map[any]any:
			if n, ok := m["name"]; ok {
				names = append(names, fmt.Sprint(n))
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (it monitors: " + strings.Join(names, ", ") + ")"
}

// isRefusal reports whether err is an error reply of the server (it
// answered, and said no), not a network error or a timeout.
func isRefusal(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// tlsOptions applies -tls-ca and -tls-insecure to a rediss:// URL's TLS
// settings (they make no sense without TLS).
func tlsOptions(cfg **tls.Config, o options) error {
	if o.tlsCA == "" && !o.insecure {
		return nil
	}
	if *cfg == nil {
		return errUsage("-tls-ca and -tls-insecure need a rediss:// URL")
	}
	if o.insecure {
		(*cfg).InsecureSkipVerify = true
	}
	if o.tlsCA != "" {
		pem, err := os.ReadFile(o.tlsCA)
		if err != nil {
			return fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-tls-ca %s: no PEM certificate in it", o.tlsCA)
		}
		(*cfg).RootCAs = pool
	}
	if (*cfg).MinVersion == 0 {
		(*cfg).MinVersion = tls.VersionTLS12
	}
	return nil
}

// redact hides the secrets of a -redis URL in messages: the password of
// its userinfo (user:pass@ reads user:***@; a userinfo without a colon,
// which redis-sentinel:// takes for a password, reads ***@), and the value
// of every query parameter whose name contains "pass" (password=,
// sentinel_password=, ...). It works on the text, so that a URL that does
// not parse is hidden too.
func redact(spec string) string {
	scheme, rest, ok := strings.Cut(spec, "://")
	if !ok {
		return spec
	}
	rest, query, hasQuery := strings.Cut(rest, "?")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, _, hasPass := strings.Cut(rest[:at], ":")
		if hasPass {
			rest = user + ":***" + rest[at:]
		} else {
			rest = "***" + rest[at:]
		}
	}
	if hasQuery {
		params := strings.Split(query, "&")
		for i, p := range params {
			key, _, _ := strings.Cut(p, "=")
			name, err := url.QueryUnescape(key)
			if err != nil || strings.Contains(strings.ToLower(name), "pass") {
				params[i] = key + "=***"
			}
		}
		rest += "?" + strings.Join(params, "&")
	}
	return scheme + "://" + rest
}

// badURL is the error for a -redis URL that does not parse (bad usage,
// exit status 2), its secrets hidden, also in the copy of the URL a
// *url.Error carries.
func badURL(spec string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact(ue.URL)
	}
	return errUsage(fmt.Sprintf("-redis %q: %v", redact(spec), err))
}

// since formats a duration for people: 12.4s, 3m05s, 1h02m.
func since(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
