package adapter

// Must returns v, or panics with err (an error value) when err is not nil.
// Every adapter's Middleware, Wrap and …Interceptor is its New this way: a
// configuration error stops the program at start-up, never on a request.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
