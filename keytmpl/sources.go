package keytmpl

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Key sources: the one grammar every adapter's templates share. A
// placeholder is {source} or {source.name}; each adapter offers built-in
// sources (gin and net/http: path, query, header, json, method, …; gRPC:
// req, md, method; asynq: payload, type, queue) and lets users add their
// own with WithSource, named "tenant" for {tenant} or "auth.user" for
// {auth.user}. A template is checked against the sources when the adapter
// is built, so a typo fails at start-up.

// ErrSourceFailed marks a key source that failed through no fault of the
// request: a value of a type the source cannot turn into a key (a struct
// put in a gin context under a {ctx.*} name), for example. Adapters answer
// it as the server's error (HTTP 500, gRPC Internal), never the caller's
// 400.
var ErrSourceFailed = errors.New("keylock: key source failed")

// Lookup returns one placeholder's value for one request of type R. It
// returns ErrMissing when the value is absent; another error is the
// request's fault (a body that is not JSON) and its message becomes the
// *KeyError's reason, unless it matches ErrSourceFailed (the server's
// fault).
type Lookup[R any] func(r R) (string, error)

// Source compiles the placeholders of one source into lookups: it is given
// the placeholder's name ("" for a bare {source}) and returns the lookup, or
// an error saying why the placeholder is not valid for it.
type Source[R any] func(name string) (Lookup[R], error)

// Sources is the set of placeholder sources of one adapter: built-in
// sources by name plus custom lookups added with Add. The zero value has
// none.
type Sources[R any] struct {
	builtin map[string]Source[R]
	custom  map[string]Lookup[R] // by placeholder text: "{tenant}", "{auth.user}"
}

// NewSources returns the sources of an adapter with the given built-in
// ones. The map is not copied: do not change it afterwards.
func NewSources[R any](builtin map[string]Source[R]) Sources[R] {
	return Sources[R]{builtin: builtin}
}

// Add registers a custom source (an adapter's WithSource): name is "tenant"
// for {tenant} or "auth.user" for {auth.user}. A name that is not a valid
// placeholder, a nil lookup, a built-in source or a name added twice is an
// error naming the option, e.g. `WithSource("tenant"): registered twice`
// (adapters report it as an invalid option). Add copies the custom set on
// write, so copies of s made before it do not change.
func (s *Sources[R]) Add(name string, l Lookup[R]) error {
	t, err := Parse("{" + name + "}")
	if err != nil || len(t.phs) != 1 || t.phs[0].String() != "{"+name+"}" {
		return fmt.Errorf("WithSource(%q): not a valid placeholder name (want \"source\" or \"source.name\", source matching [a-z][a-z0-9_]*)", name)
	}
	p := t.phs[0]
	switch {
	case l == nil:
		return fmt.Errorf("WithSource(%q): nil function", name)
	case s.builtin[p.Source] != nil:
		return fmt.Errorf("WithSource(%q): %q is a built-in source", name, p.Source)
	case s.custom[p.String()] != nil:
		return fmt.Errorf("WithSource(%q): registered twice", name)
	}
	custom := make(map[string]Lookup[R], len(s.custom)+1)
	maps.Copy(custom, s.custom)
	custom[p.String()] = l
	s.custom = custom
	return nil
}

// With returns a copy of s whose built-in source name is src (adding it, or
// replacing the one s had): grpclock uses it to give each method a {req.*}
// source that knows the method's request message.
func (s Sources[R]) With(name string, src Source[R]) Sources[R] {
	builtin := make(map[string]Source[R], len(s.builtin)+1)
	maps.Copy(builtin, s.builtin)
	builtin[name] = src
	s.builtin = builtin
	return s
}

// compile returns the lookup of p, or why p names no source.
func (s *Sources[R]) compile(p Placeholder) (Lookup[R], error) {
	if l := s.custom[p.String()]; l != nil {
		return l, nil
	}
	if src := s.builtin[p.Source]; src != nil {
		l, err := src(p.Name)
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", p.Source, err)
		}
		return l, nil
	}
	for name := range s.custom {
		if strings.HasPrefix(name, "{"+p.Source+"}") || strings.HasPrefix(name, "{"+p.Source+".") {
			return nil, fmt.Errorf("%s is not registered with WithSource (%s is)", p, name)
		}
	}
	known := slices.Sorted(maps.Keys(s.builtin))
	for _, name := range slices.Sorted(maps.Keys(s.custom)) {
		known = append(known, strings.Trim(name, "{}"))
	}
	return nil, fmt.Errorf("unknown source %q (known: %s; add others with WithSource)", p.Source, strings.Join(known, ", "))
}

// Named is a Source for {source.name} placeholders: the name is required
// and handed to f, which compiles it (e.g. parses a JSON path).
func Named[R any](example string, f func(name string) (Lookup[R], error)) Source[R] {
	return func(name string) (Lookup[R], error) {
		if name == "" {
			return nil, fmt.Errorf("needs a name, as in %s", example)
		}
		return f(name)
	}
}

// Bare is a Source for a placeholder that takes no name, such as {method}.
func Bare[R any](l Lookup[R]) Source[R] {
	return func(name string) (Lookup[R], error) {
		if name != "" {
			return nil, errors.New("takes no name")
		}
		return l, nil
	}
}

// Present is a Lookup result helper: (v, nil) when ok, else ErrMissing.
func Present(v string, ok bool) (string, error) {
	if !ok {
		return "", ErrMissing
	}
	return v, nil
}

// Renderer is a template whose placeholders are compiled against one
// adapter's sources: it renders the key of a request of type R. It is
// immutable and safe for concurrent use.
type Renderer[R any] struct {
	tmpl    *Template
	lookups []Lookup[R]
}

// NewRenderer checks every placeholder of t against sources (an unknown
// source, or a name the source refuses, is an error naming the template
// and the placeholder) and compiles one lookup per placeholder.
func NewRenderer[R any](t *Template, sources Sources[R]) (*Renderer[R], error) {
	rn := &Renderer[R]{tmpl: t}
	err := t.Check(func(p Placeholder) error {
		l, err := sources.compile(p)
		rn.lookups = append(rn.lookups, l)
		return err
	})
	if err != nil {
		return nil, err
	}
	return rn, nil
}

// Template returns the template rn renders.
func (rn *Renderer[R]) Template() *Template { return rn.tmpl }

// Render builds the key for r. A missing, empty, too long or refused value
// is a *KeyError naming the placeholder; a source failing through no fault
// of r returns an error matching ErrSourceFailed.
func (rn *Renderer[R]) Render(r R) (string, error) {
	var buf [256]byte
	b, err := rn.AppendRender(buf[:0], r)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendRender is Render appending the key to dst (see
// Template.AppendRender).
func (rn *Renderer[R]) AppendRender(dst []byte, r R) ([]byte, error) {
	return rn.tmpl.appendRender(dst, func(_ Placeholder, i int) (string, error) {
		return rn.lookups[i](r)
	})
}
