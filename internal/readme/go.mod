module github.com/keylock/keylock/internal/readme

go 1.26.0

replace (
	github.com/keylock/keylock => ../..
	github.com/keylock/keylock/cmd/keylock => ../../cmd/keylock
	github.com/keylock/keylock/dashboard => ../../dashboard
	github.com/keylock/keylock/examples/seckill => ../../examples/seckill
	github.com/keylock/keylock/jobs/asynq => ../../jobs/asynq
	github.com/keylock/keylock/jobs/asynqtrace => ../../jobs/asynqtrace
	github.com/keylock/keylock/middleware/gin => ../../middleware/gin
	github.com/keylock/keylock/middleware/grpc => ../../middleware/grpc
	github.com/keylock/keylock/middleware/http => ../../middleware/http
	github.com/keylock/keylock/middleware/internal/loopbench => ../../middleware/internal/loopbench
	github.com/keylock/keylock/tracing => ../../tracing
)
