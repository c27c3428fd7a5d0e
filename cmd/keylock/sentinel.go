package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Sentinel deployment is named by -sentinel ADDRS -master NAME, by
// -master NAME with the sentinels' addresses in -redis, or by a URL:
//
//	redis-sentinel://[user:pass@]host:port[,host:port...][/NAME[/DB]][?master_name=NAME&sentinel_password=...]
//	redis://[user:pass@]host:port[/DB]?master_name=NAME[&addr=host:port...]   (go-redis's ParseFailoverURL)
//
// In a redis-sentinel:// URL the user and password are the master's (the
// data node's); the sentinels' own, if they need any, go in
// sentinel_username and sentinel_password. In go-redis's redis://
// ...?master_name= form the user and password are the sentinels' and the
// master's go in the username and password parameters, as go-redis defines
// it; rediss:// there enables TLS.

const sentinelScheme = "redis-sentinel://"

// sentinelURL reports whether spec is a URL naming a Sentinel deployment.
func sentinelURL(spec string) bool {
	if strings.HasPrefix(spec, sentinelScheme) {
		return true
	}
	if !strings.Contains(spec, "://") {
		return false
	}
	u, err := url.Parse(spec)
	return err == nil && u.Query().Has("master_name")
}

// failoverOptions turns the flags into go-redis failover options.
func failoverOptions(o options) (*redis.FailoverOptions, error) {
	spec := strings.TrimSpace(o.redis)
	var fo *redis.FailoverOptions
	var err error
	switch {
	case o.sentinels != "":
		fo = &redis.FailoverOptions{SentinelAddrs: splitAddrs(o.sentinels)}
	case strings.HasPrefix(spec, sentinelScheme):
		fo, err = parseSentinelURL(spec)
	case strings.Contains(spec, "://"):
		fo, err = redis.ParseFailoverURL(spec)
	default: // -master NAME with the sentinels in -redis
		fo = &redis.FailoverOptions{SentinelAddrs: splitAddrs(spec)}
	}
	if err != nil {
		return nil, badURL(spec, err)
	}
	if o.master != "" {
		fo.MasterName = o.master
	}
	if fo.MasterName == "" {
		return nil, errUsage("a Sentinel deployment needs the master's name: -master NAME (or master_name= in the URL)")
	}
	if len(fo.SentinelAddrs) == 0 {
		return nil, errUsage("-sentinel: no address")
	}
	if err := tlsOptions(&fo.TLSConfig, o); err != nil {
		return nil, err
	}
	fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout = o.timeout, o.timeout, o.timeout
	fo.MaxRetries = 1
	return fo, nil
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// parseSentinelURL parses redis-sentinel://[user:pass@]h:p[,h:p...][/NAME[/DB]][?query]
// by rewriting it into go-redis's failover URL (the host list is not a
// valid URL authority).
func parseSentinelURL(spec string) (*redis.FailoverOptions, error) {
	rest := strings.TrimPrefix(spec, sentinelScheme)
	rest, rawQuery, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	var userinfo string
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, authority = authority[:at], authority[at+1:]
	}
	hosts := splitAddrs(authority)
	if len(hosts) == 0 {
		return nil, errors.New("no sentinel address")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, err
	}
	sentinelUser, sentinelPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	db := ""
	switch len(parts) {
	case 0:
	case 1:
		q.Set("master_name", parts[0])
	case 2:
		q.Set("master_name", parts[0])
		db = "/" + parts[1]
	default:
		return nil, fmt.Errorf("path %q: want /MASTER or /MASTER/DB", path)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	fo, err := redis.ParseFailoverURL("redis://" + hosts[0] + db + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	fo.SentinelUsername, fo.SentinelPassword = sentinelUser, sentinelPass
	if userinfo != "" {
		u, err := url.Parse("redis://" + userinfo + "@x")
		if err != nil {
			return nil, errors.New("bad user:password")
		}
		fo.Username = u.User.Username()
		fo.Password, _ = u.User.Password()
		if _, hasPass := u.User.Password(); !hasPass {
			// redis-sentinel://password@host: a password alone.
			fo.Username, fo.Password = "", u.User.Username()
		}
	}
	return fo, nil
}

// connectSentinel asks the sentinels where the master is (findSentinel),
// then opens a failover client, which follows the master through
// failovers, and checks the server it reaches is the master.
func connectSentinel(ctx context.Context, o options) (redis.UniversalClient, error) {
	fo, err := failoverOptions(o)
	if err != nil {
		return nil, err
	}
	where := sentinelTarget(fo.MasterName, fo.SentinelAddrs)
	addr, err := findSentinel(ctx, fo)
	if err != nil {
		return nil, fmt.Errorf("cannot find the master of %s: %w", where, err)
	}
	// The failover client asks all of its sentinels at once and waits for
	// every answer, each for up to its read timeout (the whole -timeout), so
	// one that never answers would use it all: it is given the sentinel that
	// just answered, and learns the others from it (SENTINEL SENTINELS).
	fc := *fo
	fc.SentinelAddrs = []string{addr}
	rdb := redis.NewFailoverClient(&fc)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("cannot reach Redis, %s: %w", where, err)
	}
	role, _, err := serverRole(ctx, rdb)
	switch {
	case err != nil && isRefusal(err):
		o.warnf("could not check that the server the sentinels name as master is one: it refused ROLE (%v)", err)
	case err != nil:
		_ = rdb.Close()
		return nil, fmt.Errorf("cannot reach Redis, %s: %w", where, err)
	case role != "master":
		_ = rdb.Close()
		return nil, fmt.Errorf("the server the sentinels name as master of %q reports role %q (a failover in progress?); try again", fo.MasterName, role)
	}
	return rdb, nil
}

// minProbe is the least time findSentinel gives a sentinel to answer.
const minProbe = 200 * time.Millisecond

// findSentinel asks the sentinels, one after another, where fo's master is
// and returns the address of the first that knows; if none does, the error
// says what each one answered (an unknown master name or unreachable
// sentinels get a message of their own). Each sentinel gets an equal share
// of the time left until ctx's deadline (at least minProbe), which also
// bounds its dial, read and write timeouts, so that one that accepts
// connections but never answers leaves time to ask the others.
func findSentinel(ctx context.Context, fo *redis.FailoverOptions) (string, error) {
	var reasons []string
	for i, addr := range fo.SentinelAddrs {
		left := fo.ReadTimeout
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		share := max(left/time.Duration(len(fo.SentinelAddrs)-i), minProbe)
		pctx, cancel := context.WithTimeout(ctx, share)
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: addr, Username: fo.SentinelUsername, Password: fo.SentinelPassword, TLSConfig: fo.TLSConfig,
			DialTimeout: share, ReadTimeout: share, WriteTimeout: share, MaxRetries: 1,
		})
		_, err := sc.GetMasterAddrByName(pctx, fo.MasterName).Result()
		if errors.Is(err, redis.Nil) {
			names := sentinelMasters(sc.Masters(pctx).Result())
			err = fmt.Errorf("monitors no master named %q%s", fo.MasterName, names)
		}
		_ = sc.Close()
		cancel()
		if err == nil {
			return addr, nil
		}
		reasons = append(reasons, fmt.Sprintf("sentinel %s: %v", addr, err))
	}
	return "", errors.New(strings.Join(reasons, "; "))
}

// sentinelTarget names a Sentinel deployment in messages.
func sentinelTarget(master string, sentinels []string) string {
	return fmt.Sprintf("master %q via sentinel %s", master, strings.Join(sentinels, ","))
}
