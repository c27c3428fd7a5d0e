module github.com/keylock/keylock/middleware/internal/loopbench

go 1.26.0

require (
	github.com/gin-gonic/gin v1.12.0
	github.com/keylock/keylock v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/middleware/gin v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/middleware/grpc v0.0.0-00010101000000-000000000000
	github.com/keylock/keylock/middleware/http v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic v1.15.0 // indirect
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/gabriel-vasile/mimetype v1.4.13 // indirect
	github.com/gin-contrib/sse v1.1.0 // indirect
	github.com/go-playground/locales v0.14.1 // indirect
	github.com/go-playground/universal-translator v0.18.1 // indirect
	github.com/go-playground/validator/v10 v10.30.1 // indirect
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/goccy/go-yaml v1.19.2 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/leodido/go-urn v1.4.0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/pelletier/go-toml/v2 v2.2.4 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	github.com/quic-go/quic-go v0.59.0 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	github.com/ugorji/go/codec v1.3.1 // indirect
	go.mongodb.org/mongo-driver/v2 v2.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/arch v0.23.0 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/keylock/keylock => ../../..
	github.com/keylock/keylock/cmd/keylock => ../../../cmd/keylock
	github.com/keylock/keylock/dashboard => ../../../dashboard
	github.com/keylock/keylock/examples/seckill => ../../../examples/seckill
	github.com/keylock/keylock/internal/readme => ../../../internal/readme
	github.com/keylock/keylock/jobs/asynq => ../../../jobs/asynq
	github.com/keylock/keylock/jobs/asynqtrace => ../../../jobs/asynqtrace
	github.com/keylock/keylock/middleware/gin => ../../../middleware/gin
	github.com/keylock/keylock/middleware/grpc => ../../../middleware/grpc
	github.com/keylock/keylock/middleware/http => ../../../middleware/http
	github.com/keylock/keylock/tracing => ../../../tracing
)
