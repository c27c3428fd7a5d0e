package keytmpl_test

import (
	"errors"
	"fmt"

	"github.com/keylock/keylock/keytmpl"
)

func ExampleParse() {
	tpl, err := keytmpl.Parse("seckill:{path.item}:{header.X-User-ID}")
	if err != nil {
		panic(err) // a bad template fails at start-up, never per request
	}

	// An adapter resolves each placeholder from the request.
	request := map[keytmpl.Placeholder]string{
		{Source: "path", Name: "item"}:        "42",
		{Source: "header", Name: "X-User-ID"}: "u:7", // the ':' is encoded
	}
	key, err := tpl.Render(keytmpl.ResolverFunc(func(p keytmpl.Placeholder, _ int) (string, bool) {
		v, ok := request[p]
		return v, ok
	}))
	fmt.Println(key, err)

	// A missing value is the caller's error.
	delete(request, keytmpl.Placeholder{Source: "header", Name: "X-User-ID"})
	_, err = tpl.Render(keytmpl.ResolverFunc(func(p keytmpl.Placeholder, _ int) (string, bool) {
		v, ok := request[p]
		return v, ok
	}))
	fmt.Println(err, errors.Is(err, keytmpl.ErrInvalidKey))

	// Output:
	// seckill:42:u%3A7 <nil>
	// keylock: key placeholder {header.X-User-ID}: missing true
}
