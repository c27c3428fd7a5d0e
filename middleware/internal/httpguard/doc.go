// Package httpguard is what the HTTP adapters (ginlock, httplock) share:
// the placeholder sources that read an *http.Request ({query.*},
// {header.*}, {json.*}, {method}) and the default answers to a refused
// request (status, Retry-After, JSON body).
package httpguard
