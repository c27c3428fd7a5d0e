module github.com/keylock/keylock/jobs/asynqtrace

go 1.26.0

require (
	github.com/hibiken/asynq v0.26.0
	github.com/keylock/keylock v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/internal/spantest v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/jobs/asynq v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/jobs/internal/asynqtest v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/tracing v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/metric v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/keylock/keylock => ../..
	github.com/keylock/keylock/cmd/keylock => ../../cmd/keylock
	github.com/keylock/keylock/dashboard => ../../dashboard
	github.com/keylock/keylock/examples/seckill => ../../examples/seckill
	github.com/keylock/keylock/internal/readme => ../../internal/readme
	github.com/keylock/keylock/internal/spantest => ../../internal/spantest
	github.com/keylock/keylock/jobs/asynq => ../../jobs/asynq
	github.com/keylock/keylock/jobs/internal/asynqtest => ../internal/asynqtest
	github.com/keylock/keylock/middleware/gin => ../../middleware/gin
	github.com/keylock/keylock/middleware/grpc => ../../middleware/grpc
	github.com/keylock/keylock/middleware/http => ../../middleware/http
	github.com/keylock/keylock/middleware/internal/loopbench => ../../middleware/internal/loopbench
	github.com/keylock/keylock/tracing => ../../tracing
)
