package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// connect opens a client for o.redis and checks that Redis answers. A
// single address whose server reports cluster_enabled:1 is reopened as a
// cluster client seeded with it (same credentials and TLS).
func connect(ctx context.Context, o options) (redis.UniversalClient, error) {
	spec := strings.TrimSpace(o.redis)
	var opt *redis.Options
	var seeds []string
	switch {
	case strings.Contains(spec, "://"):
		var err error
		if opt, err = redis.ParseURL(spec); err != nil {
			return nil, fmt.Errorf("-redis %q: %w", redact(spec), err)
		}
	case strings.Contains(spec, ","):
		seeds = strings.Split(spec, ",")
		opt = &redis.Options{Addr: seeds[0]}
	case spec == "":
		return nil, fmt.Errorf("-redis: empty address")
	default:
		opt = &redis.Options{Addr: spec}
	}
	if err := tlsOptions(opt, o); err != nil {
		return nil, err
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = o.timeout, o.timeout, o.timeout
	opt.MaxRetries = 1
	where := redact(spec)

	if seeds == nil {
		rdb := redis.NewClient(opt)
		info, err := rdb.Info(ctx, "cluster").Result()
		if err != nil {
			_ = rdb.Close()
			return nil, fmt.Errorf("cannot reach Redis at %s: %w", where, err)
		}
		if !strings.Contains(info, "cluster_enabled:1") {
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

// tlsOptions applies -tls-ca and -tls-insecure to a rediss:// URL's TLS
// settings (they make no sense without TLS).
func tlsOptions(opt *redis.Options, o options) error {
	if o.tlsCA == "" && !o.insecure {
		return nil
	}
	if opt.TLSConfig == nil {
		return fmt.Errorf("-tls-ca and -tls-insecure need a rediss:// URL")
	}
	if o.insecure {
		opt.TLSConfig.InsecureSkipVerify = true
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
		opt.TLSConfig.RootCAs = pool
	}
	if opt.TLSConfig.MinVersion == 0 {
		opt.TLSConfig.MinVersion = tls.VersionTLS12
	}
	return nil
}

// redact hides the password of a URL in messages.
func redact(spec string) string {
	scheme, rest, ok := strings.Cut(spec, "://")
	if !ok {
		return spec
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return spec
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return spec
	}
	return scheme + "://" + user + ":***@" + rest[at+1:]
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
