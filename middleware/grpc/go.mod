module github.com/keylock/keylock/middleware/grpc

go 1.26.0

require (
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/keylock/keylock v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace (
	github.com/keylock/keylock => ../..
	github.com/keylock/keylock/cmd/keylock => ../../cmd/keylock
	github.com/keylock/keylock/dashboard => ../../dashboard
	github.com/keylock/keylock/examples/seckill => ../../examples/seckill
	github.com/keylock/keylock/internal/readme => ../../internal/readme
	github.com/keylock/keylock/jobs/asynq => ../../jobs/asynq
	github.com/keylock/keylock/jobs/asynqtrace => ../../jobs/asynqtrace
	github.com/keylock/keylock/middleware/gin => ../../middleware/gin
	github.com/keylock/keylock/middleware/http => ../../middleware/http
	github.com/keylock/keylock/middleware/internal/loopbench => ../../middleware/internal/loopbench
	github.com/keylock/keylock/tracing => ../../tracing
)
