package tracingtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/keylock/keylock/internal/spantest"
	ginlock "github.com/keylock/keylock/middleware/gin"
	httplock "github.com/keylock/keylock/middleware/http"
)

// Each adapter beside its framework's OTel instrumentation, with the
// tracing defaults (no key attribute): a request that finds its key busy,
// one whose key value is invalid, and one that gets the lock. No span —
// the framework's server span included — may carry the rendered key or a
// value it was rendered from in a name, attribute, event or status; the
// busy and invalid answers are the client's, not server errors; and no
// exported text says "keylock: keylock:".

// The secret values: a user id and an item, rendered into "buy:<item>:<user>".
const (
	secretUser = "user-7f3a9"
	secretItem = "item-31337"
	secretKey  = "buy:" + secretItem + ":" + secretUser
)

// checkPrivate fails for any span of h holding a secret, and for server
// spans marked as errors.
func checkPrivate(t *testing.T, h *harness) {
	t.Helper()
	spans := h.spans.Ended()
	if len(spans) == 0 {
		t.Fatal("no spans recorded")
	}
	for _, s := range spans {
		for _, text := range spantest.Texts(s) {
			for _, secret := range []string{secretUser, secretItem} {
				if strings.Contains(text, secret) {
					t.Errorf("span %q holds %q in %q", s.Name(), secret, text)
				}
			}
			if strings.Contains(text, "keylock: keylock:") {
				t.Errorf("span %q says %q", s.Name(), text)
			}
		}
		if s.SpanKind() == trace.SpanKindServer && s.Status().Code == codes.Error {
			t.Errorf("server span %q has status Error (%q): busy and invalid-key answers are not server errors", s.Name(), s.Status().Description)
		}
	}
}

// serverSpans waits until n server spans have ended.
func serverSpans(t *testing.T, h *harness, n int) {
	t.Helper()
	eventually(t, "the server spans to end", func() bool {
		got := 0
		for _, s := range h.spans.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				got++
			}
		}
		return got >= n
	})
}

// httpCalls makes the busy, invalid and locked requests against url
// (POST /buy with the item in a JSON body and the user in X-User-ID,
// where the frameworks record neither) and checks their statuses.
func httpCalls(t *testing.T, h *harness, url string) {
	t.Helper()
	post := func(item, user string) int {
		req, _ := http.NewRequest(http.MethodPost, url+"/buy", strings.NewReader(`{"item":"`+item+`"}`))
		if user != "" {
			req.Header.Set("X-User-ID", user)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	l := holder(t, h.client, secretKey)
	if got := post(secretItem, secretUser); got != http.StatusConflict {
		t.Errorf("busy: HTTP %d, want 409", got)
	}
	unlock(t, context.Background(), l)
	if got := post(secretItem, ""); got != http.StatusBadRequest {
		t.Errorf("no user: HTTP %d, want 400", got)
	}
	if got := post(secretItem, secretUser); got != http.StatusNoContent {
		t.Errorf("locked: HTTP %d, want 204", got)
	}
	serverSpans(t, h, 3)
}

const buyTemplate = "buy:{json.item}:{header.X-User-ID}"

func TestGinSpansHoldNoKey(t *testing.T) {
	h := newHarness(t, nil)
	r := gin.New()
	r.Use(otelgin.Middleware("shop", otelgin.WithTracerProvider(h.tp), otelgin.WithMeterProvider(metricnoop.NewMeterProvider())))
	r.POST("/buy", ginlock.Middleware(h.client, buyTemplate), func(c *gin.Context) { c.Status(http.StatusNoContent) })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	httpCalls(t, h, srv.URL)
	checkPrivate(t, h)
}

func TestHTTPLockSpansHoldNoKey(t *testing.T) {
	h := newHarness(t, nil)
	mux := http.NewServeMux()
	mux.Handle("POST /buy", httplock.Middleware(h.client, buyTemplate)(http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	srv := httptest.NewServer(otelhttp.NewHandler(mux, "shop", otelhttp.WithTracerProvider(h.tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider())))
	t.Cleanup(srv.Close)
	httpCalls(t, h, srv.URL)
	checkPrivate(t, h)
}

func TestGRPCSpansHoldNoKey(t *testing.T) {
	h := newHarness(t, nil)
	otelOpts := []otelgrpc.Option{otelgrpc.WithTracerProvider(h.tp), otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider())}
	client := healthpb.NewHealthClient(lockedHealth(t, h, "buy:{req.service}:{md.x-user-id}", otelOpts))
	check := func(user string) error {
		ctx := context.Background()
		if user != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-user-id", user)
		}
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: secretItem})
		return err
	}
	l := holder(t, h.client, secretKey)
	if err := check(secretUser); err == nil || strings.Contains(err.Error(), secretUser) {
		t.Errorf("busy: %v, want an error without the key", err)
	}
	unlock(t, context.Background(), l)
	if err := check(""); err == nil {
		t.Error("no user: nil error, want InvalidArgument")
	}
	if err := check(secretUser); err != nil {
		t.Errorf("locked: %v", err)
	}
	serverSpans(t, h, 3)
	checkPrivate(t, h)
}
