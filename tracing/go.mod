module github.com/keylock/keylock/tracing

go 1.26.0

require (
	github.com/keylock/keylock v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/exporters/stdout/stdouttrace v1.47.0
	go.opentelemetry.io/otel/metric v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace (
	github.com/keylock/keylock => ..
	github.com/keylock/keylock/cmd/keylock => ../cmd/keylock
	github.com/keylock/keylock/dashboard => ../dashboard
	github.com/keylock/keylock/examples/seckill => ../examples/seckill
	github.com/keylock/keylock/internal/readme => ../internal/readme
	github.com/keylock/keylock/jobs/asynq => ../jobs/asynq
	github.com/keylock/keylock/jobs/asynqtrace => ../jobs/asynqtrace
	github.com/keylock/keylock/middleware/gin => ../middleware/gin
	github.com/keylock/keylock/middleware/grpc => ../middleware/grpc
	github.com/keylock/keylock/middleware/http => ../middleware/http
	github.com/keylock/keylock/middleware/internal/loopbench => ../middleware/internal/loopbench
)
