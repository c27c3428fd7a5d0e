module github.com/keylock/keylock/internal/tracingtest

go 1.26.0

require (
	github.com/gin-gonic/gin v1.12.0
	github.com/hibiken/asynq v0.26.0
	github.com/keylock/keylock v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/internal/spantest v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/jobs/asynq v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/middleware/gin v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/middleware/grpc v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/middleware/http v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/tracing v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.24.1
	github.com/redis/go-redis/v9 v9.23.0
	go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin v0.65.0
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.72.0
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.72.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/exporters/prometheus v0.69.0
	go.opentelemetry.io/otel/metric v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic v1.15.0 // indirect
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/felixge/httpsnoop v1.1.0 // indirect
	github.com/gabriel-vasile/mimetype v1.4.13 // indirect
	github.com/gin-contrib/sse v1.1.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-playground/locales v0.14.1 // indirect
	github.com/go-playground/universal-translator v0.18.1 // indirect
	github.com/go-playground/validator/v10 v10.30.1 // indirect
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/leodido/go-urn v1.4.0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pelletier/go-toml/v2 v2.2.4 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/otlptranslator v1.0.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	github.com/quic-go/quic-go v0.59.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	github.com/ugorji/go/codec v1.3.1 // indirect
	go.mongodb.org/mongo-driver/v2 v2.5.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/arch v0.23.0 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/keylock/keylock => ../..
	github.com/keylock/keylock/cmd/keylock => ../../cmd/keylock
	github.com/keylock/keylock/dashboard => ../../dashboard
	github.com/keylock/keylock/examples/seckill => ../../examples/seckill
	github.com/keylock/keylock/internal/readme => ../../internal/readme
	github.com/keylock/keylock/internal/spantest => ../spantest
	github.com/keylock/keylock/jobs/asynq => ../../jobs/asynq
	github.com/keylock/keylock/jobs/asynqtrace => ../../jobs/asynqtrace
	github.com/keylock/keylock/jobs/internal/asynqtest => ../../jobs/internal/asynqtest
	github.com/keylock/keylock/middleware/gin => ../../middleware/gin
	github.com/keylock/keylock/middleware/grpc => ../../middleware/grpc
	github.com/keylock/keylock/middleware/http => ../../middleware/http
	github.com/keylock/keylock/middleware/internal/loopbench => ../../middleware/internal/loopbench
	github.com/keylock/keylock/tracing => ../../tracing
)
