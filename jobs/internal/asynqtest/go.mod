module github.com/keylock/keylock/jobs/internal/asynqtest

go 1.26.0

replace (
	github.com/keylock/keylock => ../../..
	github.com/keylock/keylock/jobs/asynq => ../../asynq
)

require (
	github.com/hibiken/asynq v0.26.0
	github.com/keylock/keylock v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/jobs/asynq v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
