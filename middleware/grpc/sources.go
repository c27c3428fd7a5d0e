package grpclock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/keylock/keylock/core"
)

// Built-in placeholder sources.
const (
	srcReq    = "req"    // {req.<dotted.field>}: a field of the request message
	srcMD     = "md"     // {md.<key>}: first value of an incoming metadata key
	srcMethod = "method" // {method}: the full method name
)

// call is what the placeholders of one call are resolved from. It is the
// core.Resolver handed to Template.Render.
type call struct {
	ctx    context.Context
	method string
	req    any // request message; first message of a stream; nil if none
	vals   []valueFunc
}

// Value resolves the index-th placeholder with the function compiled for it.
func (c *call) Value(_ core.Placeholder, index int) (string, bool) { return c.vals[index](c) }

// valueFunc resolves one placeholder for one call.
type valueFunc func(c *call) (string, bool)

// compiled is a template's placeholders turned into lookups, once, when the
// interceptors are built.
type compiled struct {
	vals []valueFunc // one per placeholder, in order
	// needsMsg: a placeholder reads the request message ({req.*} or a
	// custom source), so a stream is locked on its first message.
	needsMsg bool
}

// compile checks every placeholder of t and compiles its lookup. in is the
// method's request message type when the method is registered in
// protoregistry.GlobalFiles (generated code registers itself), else nil;
// with it, {req.*} field paths are checked at start-up too.
func compile(t *core.Template, in protoreflect.MessageDescriptor, custom map[string]SourceFunc) (compiled, error) {
	var c compiled
	err := t.Check(func(p core.Placeholder) error {
		var f valueFunc
		var err error
		switch p.Source {
		case srcReq:
			f, err = reqSource(p.Name, in)
			c.needsMsg = true
		case srcMD:
			f, err = mdSource(p.Name)
		case srcMethod:
			if p.Name != "" {
				return errors.New("{method} takes no name")
			}
			f = func(c *call) (string, bool) { return c.method, true }
		default:
			fn, ok := custom[p.Source]
			if !ok {
				return fmt.Errorf("unknown source %q (known: %s)", p.Source, knownSources(custom))
			}
			if p.Name != "" {
				return fmt.Errorf("custom source %q takes no name: write {%s}", p.Source, p.Source)
			}
			f = func(c *call) (string, bool) { return fn(c.ctx, c.req) }
			c.needsMsg = true
		}
		if err != nil {
			return err
		}
		c.vals = append(c.vals, f)
		return nil
	})
	return c, err
}

func knownSources(custom map[string]SourceFunc) string {
	names := []string{srcReq + ".<field>", srcMD + ".<key>", srcMethod}
	names = append(names, slices.Sorted(maps.Keys(custom))...)
	return strings.Join(names, ", ")
}

// checkSourceName validates the name of a custom source.
func checkSourceName(name string, fn SourceFunc) error {
	switch name {
	case srcReq, srcMD, srcMethod:
		return fmt.Errorf("WithSource(%q): %q is a built-in source", name, name)
	}
	if name == "" {
		return errors.New("WithSource: empty name")
	}
	if fn == nil {
		return fmt.Errorf("WithSource(%q): nil function", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || i > 0 && ('0' <= c && c <= '9' || c == '_')) {
			return fmt.Errorf("WithSource(%q): invalid name (want [a-z][a-z0-9_]*)", name)
		}
	}
	return nil
}

// mdSource reads the first value of an incoming metadata key. Keys are
// matched lower-case, as gRPC stores them.
func mdSource(key string) (valueFunc, error) {
	if key == "" {
		return nil, errors.New("{md} needs a metadata key, e.g. {md.x-user-id}")
	}
	key = strings.ToLower(key)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':' && i == 0) {
			return nil, fmt.Errorf("%q is not a valid metadata key (want [0-9a-z-_.])", key)
		}
	}
	return func(c *call) (string, bool) {
		vs := metadata.ValueFromIncomingContext(c.ctx, key)
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}, nil
}

// reqSource reads a field of the request message by its protobuf name;
// dots select fields of nested messages.
func reqSource(path string, in protoreflect.MessageDescriptor) (valueFunc, error) {
	if path == "" {
		return nil, errors.New("{req} needs a field name, e.g. {req.item_id}")
	}
	parts := strings.Split(path, ".")
	names := make([]protoreflect.Name, len(parts))
	for i, s := range parts {
		names[i] = protoreflect.Name(s)
		if !names[i].IsValid() {
			return nil, fmt.Errorf("%q is not a protobuf field name", s)
		}
	}
	if in != nil {
		if err := checkPath(in, names); err != nil {
			return nil, err
		}
	}
	return func(c *call) (string, bool) {
		m, ok := c.req.(proto.Message)
		if !ok {
			return "", false
		}
		return fieldValue(m.ProtoReflect(), names)
	}, nil
}

// checkPath reports whether names selects a singular scalar or enum field,
// through singular message fields, starting at in.
func checkPath(in protoreflect.MessageDescriptor, names []protoreflect.Name) error {
	md := in
	for i, n := range names {
		fd := md.Fields().ByName(n)
		switch {
		case fd == nil:
			return fmt.Errorf("message %s has no field %q", md.FullName(), n)
		case fd.IsList() || fd.IsMap():
			return fmt.Errorf("field %s is repeated or a map: only singular fields can make a key", fd.FullName())
		case i < len(names)-1 && fd.Message() == nil:
			return fmt.Errorf("field %s is not a message: it has no field %q", fd.FullName(), names[i+1])
		case i == len(names)-1 && fd.Message() != nil:
			return fmt.Errorf("field %s is a message: name one of its fields", fd.FullName())
		}
		md = fd.Message()
	}
	return nil
}

// fieldValue follows names from m and formats the field it ends at. A field
// with explicit presence (a message, a oneof member, proto3 optional, proto2)
// that is not set is missing; a proto3 scalar without presence reads as its
// value, zero included.
func fieldValue(m protoreflect.Message, names []protoreflect.Name) (string, bool) {
	for i, n := range names {
		fd := m.Descriptor().Fields().ByName(n)
		if fd == nil || fd.IsList() || fd.IsMap() || fd.HasPresence() && !m.Has(fd) {
			return "", false
		}
		if i < len(names)-1 {
			if fd.Message() == nil {
				return "", false
			}
			m = m.Get(fd).Message()
			continue
		}
		return formatField(fd, m.Get(fd))
	}
	return "", false
}

// formatField formats a scalar canonically: integers in decimal, floats in
// the shortest form that reads back to the same value (strconv 'g', -1),
// bools as true/false, enums by number, strings and bytes as they are.
func formatField(fd protoreflect.FieldDescriptor, v protoreflect.Value) (string, bool) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool()), true
	case protoreflect.EnumKind:
		return strconv.FormatInt(int64(v.Enum()), 10), true
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10), true
	case protoreflect.FloatKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 32), true
	case protoreflect.DoubleKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), true
	case protoreflect.StringKind:
		return v.String(), true
	case protoreflect.BytesKind:
		return string(v.Bytes()), true
	}
	return "", false
}

// inputType returns the request message type of fullMethod
// ("/pkg.Service/Method") if the method is registered, else nil.
func inputType(fullMethod string) protoreflect.MessageDescriptor {
	svc, method, ok := splitMethod(fullMethod)
	if !ok {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc + "." + method))
	if err != nil {
		return nil
	}
	if md, ok := d.(protoreflect.MethodDescriptor); ok {
		return md.Input()
	}
	return nil
}

// splitMethod splits "/pkg.Service/Method" into its service and method.
func splitMethod(fullMethod string) (svc, method string, ok bool) {
	rest, ok := strings.CutPrefix(fullMethod, "/")
	if !ok {
		return "", "", false
	}
	svc, method, ok = strings.Cut(rest, "/")
	if !ok || svc == "" || method == "" || strings.Contains(method, "/") {
		return "", "", false
	}
	return svc, method, true
}
