package grpclock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
	"github.com/keylock/keylock/middleware/grpc/internal/testpb"
)

// TestRequestFieldValues checks how each kind of field reads as a key value.
func TestRequestFieldValues(t *testing.T) {
	const buy = "/keylock.grpclock.test.v1.Shop/Buy"
	in, err := inputType(buy, false)
	if in == nil {
		t.Fatalf("inputType(%q) = nil, %v; want the registered BuyRequest", buy, err)
	}
	for _, tc := range []struct {
		field string
		req   any
		want  string
		ok    bool
	}{
		{"item_id", &testpb.BuyRequest{ItemId: "abc"}, "abc", true},
		{"item_id", &testpb.BuyRequest{}, "", true}, // no presence: "" (the template then rejects it as empty)
		{"user", &testpb.BuyRequest{User: -42}, "-42", true},
		{"user", &testpb.BuyRequest{}, "0", true}, // no presence: zero is a value
		{"qty", &testpb.BuyRequest{Qty: math.MaxUint64}, "18446744073709551615", true},
		{"delta", &testpb.BuyRequest{Delta: -3}, "-3", true},
		{"tier", &testpb.BuyRequest{Tier: testpb.Tier_TIER_GOLD}, "1", true}, // enums by number
		{"tier", &testpb.BuyRequest{Tier: testpb.Tier(7)}, "7", true},        // unknown to this binary
		// Floats are named as keytmpl names a JSON number (keytmpl.FormatFloat),
		// so one value has one lock name from gRPC, HTTP and asynq alike.
		{"price", &testpb.BuyRequest{Price: 0.1}, "0.1", true},             // shortest round-trip form
		{"price", &testpb.BuyRequest{Price: 1e21}, "1e+21", true},          // beyond 64-bit integers
		{"price", &testpb.BuyRequest{Price: 123456789}, "123456789", true}, // not 1.23456789e+08
		{"price", &testpb.BuyRequest{Price: 1e6}, "1000000", true},         // not 1e+06
		// -0 == 0: a handler comparing or storing the value sees one value,
		// and {json.*} names both "0" (one resource, one lock).
		{"price", &testpb.BuyRequest{Price: math.Copysign(0, -1)}, "0", true},
		{"weight", &testpb.BuyRequest{Weight: 0.1}, "0.1", true},                  // float32: its shortest decimal, not 0.10000000149011612
		{"weight", &testpb.BuyRequest{Weight: 1e6}, "1000000", true},              //
		{"gift", &testpb.BuyRequest{Gift: true}, "true", true},                    //
		{"gift", &testpb.BuyRequest{}, "false", true},                             //
		{"raw", &testpb.BuyRequest{Raw: []byte{0, 'a', 0xff}}, "\x00a\xff", true}, // bytes as they are
		{"coupon", &testpb.BuyRequest{}, "", false},                               // proto3 optional, unset
		{"coupon", &testpb.BuyRequest{Coupon: proto.String("")}, "", true},        // set to ""
		{"item.id", &testpb.BuyRequest{Item: &testpb.Item{Id: "n1"}}, "n1", true}, // nested
		{"item.count", &testpb.BuyRequest{Item: &testpb.Item{}}, "0", true},       //
		{"item.id", &testpb.BuyRequest{}, "", false},                              // unset message on the path
		{"card", &testpb.BuyRequest{}, "", false},                                 // oneof member, unset
		{"card", &testpb.BuyRequest{Pay: &testpb.BuyRequest_Card{Card: "c1"}}, "c1", true},
		{"voucher.id", &testpb.BuyRequest{Pay: &testpb.BuyRequest_Card{Card: "c1"}}, "", false},
		{"voucher.id", &testpb.BuyRequest{Pay: &testpb.BuyRequest_Voucher{Voucher: &testpb.Item{Id: "v1"}}}, "v1", true},
		{"item_id", nil, "", false},                      // no message (a stream that ended first)
		{"item_id", "not a proto", "", false},            // another codec's message
		{"item_id", (*testpb.BuyRequest)(nil), "", true}, // a nil message reads as empty
	} {
		l, err := reqSource(in)(tc.field)
		if err != nil {
			t.Fatalf("{req.%s}: %v", tc.field, err)
		}
		got, err := l(&call{ctx: context.Background(), req: tc.req})
		ok := err == nil
		if got != tc.want || ok != tc.ok {
			t.Errorf("{req.%s} of %v = %q, %v; want %q, %v", tc.field, tc.req, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFloatFieldsNameAsJSON: a float or double field and the same message
// in JSON (protojson, as a gRPC-gateway or an HTTP twin of the method sends
// it) render one lock name, {req.*} from the message and {json.*} from the
// document.
func TestFloatFieldsNameAsJSON(t *testing.T) {
	in, _ := inputType("/keylock.grpclock.test.v1.Shop/Buy", false)
	price, _ := reqSource(in)("price")
	weight, _ := reqSource(in)("weight")
	jsonPrice, _ := keytmpl.ParseJSONPath("price")
	jsonWeight, _ := keytmpl.ParseJSONPath("weight")
	for _, m := range []*testpb.BuyRequest{
		{Price: 123456789, Weight: 123456789},
		{Price: 1e6, Weight: 1e6},
		{Price: 0.1, Weight: 0.1},
		{Price: 1e21, Weight: 1e21},
		{Price: -2.5e-7, Weight: -2.5e-7},
		{Price: 1 << 62, Weight: 1 << 62},
		{Price: math.MaxFloat64, Weight: math.MaxFloat32},
	} {
		doc, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct {
			req  keytmpl.Lookup[*call]
			json *keytmpl.JSONPath
		}{{price, jsonPrice}, {weight, jsonWeight}} {
			got, err1 := f.req(&call{req: m})
			want, err2 := f.json.Lookup(doc)
			if got != want || err1 != nil || err2 != nil {
				t.Errorf("%s: {req.*} = %q (%v), {json.*} of %s = %q (%v); want one name", m, got, err1, doc, want, err2)
			}
		}
	}
}

// TestStatusMapping checks every class of core error against its code and
// details, the semaphore case included (its lock kind may not exist yet).
func TestStatusMapping(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = rdb.Close() })
	locks := core.New(rdb)
	t.Cleanup(func() { _ = locks.Close() })
	newTestRule := func(opts ...Option) *rule {
		cfg := &config{sources: keytmpl.NewSources(builtinSources(nil)), unregistered: true} // x.v1.Svc is nowhere
		adapter.Apply(cfg, opts)
		r, err := newRule(locks, "/x.v1.Svc/Do", "k:{req.id}", cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mutex, sem := newTestRule(), newTestRule(Semaphore(2))
	locked := &core.LockedError{Name: "k:1", TTL: 700 * time.Millisecond}
	watchdogHeld := &core.LockedError{Name: "k:1", TTL: 25 * time.Second}
	keyErr := &keytmpl.KeyError{Placeholder: keytmpl.Placeholder{Source: "req", Name: "id"}, Reason: "missing"}
	for _, tc := range []struct {
		name   string
		r      *rule
		err    error
		code   codes.Code
		reason string        // ErrorInfo reason, "" for none
		retry  time.Duration // RetryInfo delay, 0 for none
		field  string        // BadRequest field, "" for none
	}{
		{"busy", mutex, locked, codes.Aborted, ReasonBusy, 700 * time.Millisecond, ""},
		{"busy, watchdog TTL capped", mutex, watchdogHeld, codes.Aborted, ReasonBusy, time.Second, ""},
		{"busy ttl unknown", mutex, &core.LockedError{Name: "k:1"}, codes.Aborted, ReasonBusy, time.Second, ""},
		{"semaphore full", sem, locked, codes.ResourceExhausted, ReasonBusy, 700 * time.Millisecond, ""},
		{"bad key", mutex, keyErr, codes.InvalidArgument, ReasonInvalidKey, 0, "id"},
		{"bad name", mutex, core.ErrInvalidName, codes.InvalidArgument, ReasonInvalidKey, 0, ""},
		{"redis down", mutex, core.ErrUnavailable, codes.Unavailable, ReasonUnavailable, 0, ""},
		{"client closed", mutex, core.ErrClosed, codes.Unavailable, ReasonUnavailable, 0, ""},
		{"deadline", mutex, errors.Join(locked, context.DeadlineExceeded), codes.DeadlineExceeded, "", 0, ""},
		{"cancelled", mutex, errors.Join(locked, context.Canceled), codes.Canceled, "", 0, ""},
		{"source failed", mutex, fmt.Errorf("x: %w", keytmpl.ErrSourceFailed), codes.Internal, ReasonSourceFailed, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := status.Convert(tc.r.status(tc.err))
			if st.Code() != tc.code {
				t.Fatalf("code %s (%q), want %s", st.Code(), st.Message(), tc.code)
			}
			var reason, field string
			var retry time.Duration
			for _, d := range st.Details() {
				switch d := d.(type) {
				case *errdetails.ErrorInfo:
					reason = d.Reason
				case *errdetails.RetryInfo:
					retry = d.RetryDelay.AsDuration()
				case *errdetails.BadRequest:
					field = d.FieldViolations[0].Field
				}
			}
			if reason != tc.reason || retry != tc.retry || field != tc.field {
				t.Errorf("details: reason %q, retry %s, field %q; want %q, %s, %q", reason, retry, field, tc.reason, tc.retry, tc.field)
			}
		})
	}
}
