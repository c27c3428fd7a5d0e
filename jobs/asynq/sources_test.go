package asynqlock

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// offlineClient is a core.Client whose Redis is never contacted: building
// templates and rendering keys send nothing.
func offlineClient(t *testing.T) *core.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	c := core.New(rdb)
	t.Cleanup(func() {
		_ = c.Close()
		_ = rdb.Close()
	})
	return c
}

type tenantKey struct{}

func TestRender(t *testing.T) {
	locks := offlineClient(t)
	tenant := WithSource("tenant", func(ctx context.Context, _ *asynq.Task) (string, bool) {
		v, ok := ctx.Value(tenantKey{}).(string)
		return v, ok
	})
	ctx := context.WithValue(context.Background(), tenantKey{}, "acme")

	for _, tc := range []struct {
		template, payload string
		want              string // rendered key, or
		wantErr           string // the KeyError's message
	}{
		{"order:{payload.order_id}", `{"order_id": 42}`, "order:42", ""},
		{"order:{payload.order_id}", `{"order_id": "42"}`, "order:42", ""},
		{"n:{payload.n}", `{"n": 4.20}`, "n:4.2", ""}, // numbers by value (keytmpl.JSONPath.Lookup)
		{"n:{payload.n}", `{"n": 1e3}`, "n:1000", ""},
		{"n:{payload.n}", `{"n": -7}`, "n:-7", ""},
		{"b:{payload.ok}", `{"ok": false}`, "b:false", ""},
		{"u:{payload.user.id}", `{"user": {"id": "u:7"}}`, "u:u%3A7", ""},
		{"i:{payload.items.1.sku}", `{"items": [{"sku": "a"}, {"sku": "b"}]}`, "i:b", ""},
		{"i:{payload.items.0}", `{"items": ["x"]}`, "i:x", ""},
		{"m:{payload.m.0}", `{"m": {"0": "zero"}}`, "m:zero", ""},
		{"{type}:{payload.id}", `{"id": 1}`, "t%3Ax:1", ""},
		{"{tenant}:{payload.id}", `{"id": 1}`, "acme:1", ""},
		{"const", `not even json`, "const", ""},

		{"o:{payload.order_id}", `{"id": 1}`, "", "{payload.order_id}: missing"},
		{"o:{payload.order_id}", ``, "", "{payload.order_id}: payload: empty, not JSON"},
		{"o:{payload.order_id}", `{"order_id": 1`, "", "{payload.order_id}: payload: not valid JSON"},
		{"o:{payload.order_id}", `{"order_id": 1} {}`, "", "{payload.order_id}: payload: not valid JSON"},
		{"o:{payload.order_id}", `{"order_id": null}`, "", "{payload.order_id}: missing"},
		{"o:{payload.order_id}", `{"order_id": [1]}`, "", "{payload.order_id}: payload: a JSON array, not a string, number or boolean"},
		{"o:{payload.order_id}", `{"order_id": {}}`, "", "{payload.order_id}: payload: a JSON object, not a string, number or boolean"},
		{"o:{payload.order_id}", `{"order_id": ""}`, "", "{payload.order_id}: empty"},
		{"o:{payload.order_id}", `{"order_id": "` + strings.Repeat("x", keytmpl.MaxValueLen+1) + `"}`, "", "{payload.order_id}: too long"},
		{"i:{payload.items.2}", `{"items": [1, 2]}`, "", "{payload.items.2}: missing"},
		{"i:{payload.items.01}", `{"items": [1, 2]}`, "", "{payload.items.01}: missing"},
		{"i:{payload.items.-1}", `{"items": [1, 2]}`, "", "{payload.items.-1}: missing"},
		{"i:{payload.a.b}", `{"a": "str"}`, "", "{payload.a.b}: missing"},
		{"q:{queue}", `{}`, "", "{queue}: missing"}, // no asynq context
		{"o:{payload.order_id}", `{"ORDER_ID": "2"}`, "o:2", ""},
		{"o:{payload.order_id}", `{"order_id": "1", "ORDER_ID": "2"}`, "", "{payload.order_id}: payload: ambiguous"},
		{"o:{payload.order_id}", `{"order_id": "1", "order_id": "2"}`, "", "{payload.order_id}: payload: ambiguous"},
	} {
		l, err := newTaskLock(locks, tc.template, configWith(tenant))
		if err != nil {
			t.Fatalf("newTaskLock(%q): %v", tc.template, err)
		}
		got, err := l.g.Key(&attempt{ctx: ctx, task: asynq.NewTask("t:x", []byte(tc.payload))})
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%s with %s: got %q, %v; want %q", tc.template, tc.payload, got, err, tc.want)
		case tc.wantErr != "" && (!errors.Is(err, keytmpl.ErrInvalidKey) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s with %.40s: got %q, %v; want a keytmpl.ErrInvalidKey containing %q", tc.template, tc.payload, got, err, tc.wantErr)
		}
	}
}

func configWith(opts ...Option) *config {
	cfg := config{sources: keytmpl.NewSources(builtinSources)}
	cfg.apply(opts)
	return &cfg
}

// BenchmarkRender is the CPU side of the adapter alone: decode the payload
// and render the key (no Redis).
func BenchmarkRender(b *testing.B) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	locks := core.New(rdb)
	b.Cleanup(func() {
		_ = locks.Close()
		_ = rdb.Close()
	})
	l, err := newTaskLock(locks, "order:{payload.order_id}:{payload.user.id}", configWith())
	if err != nil {
		b.Fatal(err)
	}
	task := asynq.NewTask("order:create", []byte(`{"order_id": 42, "user": {"id": "u-7"}, "items": [{"sku": "a-1", "qty": 2}]}`))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.g.Key(&attempt{ctx: ctx, task: task}); err != nil {
			b.Fatal(err)
		}
	}
}
