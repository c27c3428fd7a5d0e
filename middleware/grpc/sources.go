package grpclock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/keytmpl"
)

// Built-in placeholder sources.
const (
	srcReq    = "req"    // {req.<dotted.field>}: a field of the request message
	srcMD     = "md"     // {md.<key>}: first value of an incoming metadata key
	srcMethod = "method" // {method}: the full method name
)

// call is one call being resolved: what the placeholders read.
type call struct {
	ctx    context.Context
	method string
	req    any // request message; first message of a stream; nil if none
}

// builtinSources are the sources of a method whose request message type is
// in (nil when the method is not registered).
func builtinSources(in protoreflect.MessageDescriptor) map[string]keytmpl.Source[*call] {
	return map[string]keytmpl.Source[*call]{
		srcReq:    reqSource(in),
		srcMD:     keytmpl.Named("{md.x-user-id}", mdSource),
		srcMethod: keytmpl.Bare(func(c *call) (string, error) { return c.method, nil }),
	}
}

// mdSource reads the first value of an incoming metadata key. Keys are
// matched lower-case, as gRPC stores them.
func mdSource(key string) (keytmpl.Lookup[*call], error) {
	key = strings.ToLower(key)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':' && i == 0) {
			return nil, fmt.Errorf("%q is not a valid metadata key (want [0-9a-z-_.])", key)
		}
	}
	return func(c *call) (string, error) {
		vs := metadata.ValueFromIncomingContext(c.ctx, key)
		if len(vs) == 0 {
			return "", keytmpl.ErrMissing
		}
		return vs[0], nil
	}, nil
}

// reqSource reads a field of the request message by its protobuf name;
// dots select fields of nested messages. With in, the path is checked at
// start-up.
func reqSource(in protoreflect.MessageDescriptor) keytmpl.Source[*call] {
	return keytmpl.Named("{req.item_id}", func(path string) (keytmpl.Lookup[*call], error) {
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
		return func(c *call) (string, error) {
			m, ok := c.req.(proto.Message)
			if !ok {
				return "", keytmpl.ErrMissing
			}
			return keytmpl.Present(fieldValue(m.ProtoReflect(), names))
		}, nil
	})
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

// formatField formats a scalar canonically: integers in decimal, floats as
// keytmpl names a JSON number (keytmpl.FormatFloat: 1e6 "1000000", 0.1
// "0.1", -0 "0"; a float by its shortest float32 decimal), so a value has
// one lock name whether it came over gRPC or in JSON, bools as true/false,
// enums by number, strings and bytes as they are.
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
		return keytmpl.FormatFloat(v.Float(), 32), true
	case protoreflect.DoubleKind:
		return keytmpl.FormatFloat(v.Float(), 64), true
	case protoreflect.StringKind:
		return v.String(), true
	case protoreflect.BytesKind:
		return string(v.Bytes()), true
	}
	return "", false
}

// inputType returns the request message type of fullMethod
// ("/pkg.Service/Method") if the method is registered. If its service is
// not, it returns nil when unregistered (AllowUnregistered) allows that, and
// otherwise an error naming the closest services of its package; it also
// fails if the name is malformed or the registered service has no such
// method.
func inputType(fullMethod string, unregistered bool) (protoreflect.MessageDescriptor, error) {
	svc, method, ok := splitMethod(fullMethod)
	if !ok {
		return nil, errors.New(`not a full method name: want "/package.Service/Method"`)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	switch {
	case err != nil && unregistered:
		return nil, nil // {req.*} fields are looked up per call
	case err != nil:
		return nil, fmt.Errorf("service %s is not registered%s: import its generated package, or give the rule AllowUnregistered() if it is served without one",
			svc, adapter.Suggest(svc, services(protoreflect.FullName(svc).Parent())))
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is a %T, not a service", svc, d)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		var names []string
		for i := range sd.Methods().Len() {
			names = append(names, string(sd.Methods().Get(i).Name()))
		}
		return nil, fmt.Errorf("service %s has no method %q (it has %s)", svc, method, strings.Join(names, ", "))
	}
	return md.Input(), nil
}

// services lists the full names of the registered services of package pkg.
func services(pkg protoreflect.FullName) (names []string) {
	protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			names = append(names, string(f.Services().Get(i).FullName()))
		}
		return true
	})
	return names
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
