// Package testpb is the small test service grpclock's tests run against.
// The generated code is committed; regenerate it from this folder with
// go generate (needs protoc, protoc-gen-go and protoc-gen-go-grpc on PATH).
package testpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative shop.proto
