package core

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// ScriptSHAs lists every embedded script by name, for tests.
func ScriptSHAs() map[string]string {
	m := make(map[string]string, len(allScripts))
	for name, s := range allScripts {
		m[name] = s.Hash()
	}
	return m
}

// LoadScript loads one embedded script with SCRIPT LOAD (checks it compiles).
func LoadScript(ctx context.Context, rdb redis.Scripter, name string) error {
	return allScripts[name].Load(ctx, rdb).Err()
}
