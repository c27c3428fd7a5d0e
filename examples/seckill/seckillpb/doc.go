// Package seckillpb holds the seckill.v1 protocol buffers and their
// generated Go code (messages and the gRPC service), used by the seckill
// example's gRPC server and its load generator.
//
// The generated files are committed. Regenerate them after editing
// seckill.proto (needs protoc, protoc-gen-go and protoc-gen-go-grpc on PATH;
// see the example's README):
//
//	go generate ./examples/seckill/seckillpb
package seckillpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative seckill.proto
