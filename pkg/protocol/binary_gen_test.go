package protocol

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/retry"
)

// The binary codec (binary_gen.go) is written from the messages' struct
// tags: a field's `kagzi:"N"` is its number on the wire, the only place
// the number is written. TestBinaryCodecGenerated fails when the file is
// stale; `go generate ./pkg/protocol/` (-update-codec) rewrites it. If the
// package does not compile for a stale file, delete it first: without it
// the hot messages merely fall back to JSON.

var updateCodec = flag.Bool("update-codec", false, "rewrite binary_gen.go from the struct tags")

const genFile = "binary_gen.go"

// binaryRoots are the messages with a binary form, and the constant
// naming each one's type byte.
var binaryRoots = []struct {
	t       reflect.Type
	typeTag string
}{
	{reflect.TypeFor[WorkRequest](), "binWorkRequest"},
	{reflect.TypeFor[Delivery](), "binDelivery"},
	{reflect.TypeFor[DeliveryAck](), "binDeliveryAck"},
	{reflect.TypeFor[Report](), "binReport"},
	{reflect.TypeFor[ReportReply](), "binReportReply"},
}

// wirePackages are the packages whose types may travel inside a
// message: each field of such a type carries a kagzi tag, as this
// package's do.
var wirePackages = map[string]bool{reflect.TypeFor[retry.Policy]().PkgPath(): true}

var (
	uuidType     = reflect.TypeFor[uuid.UUID]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	bytesType    = reflect.TypeFor[[]byte]()
	timePtrType  = reflect.TypeFor[*time.Time]()
	int64PtrType = reflect.TypeFor[*int64]()
	stringsType  = reflect.TypeFor[[]string]()
	versioned    = reflect.TypeFor[Versioned]()
	thisPkg      = versioned.PkgPath()
)

type wireField struct {
	num  int
	name string
	t    reflect.Type
}

// codecGen writes the codec of the types reachable from binaryRoots.
type codecGen struct {
	out     bytes.Buffer
	imports map[string]bool
	done    map[reflect.Type]bool
	queue   []reflect.Type
}

func (g *codecGen) p(format string, args ...any) { fmt.Fprintf(&g.out, format+"\n", args...) }

// typeName is t as the generated file writes it.
func (g *codecGen) typeName(t reflect.Type) string {
	if t.PkgPath() == thisPkg {
		return t.Name()
	}
	g.imports[t.PkgPath()] = true
	return path.Base(t.PkgPath()) + "." + t.Name()
}

// wireFields are t's fields on the wire, by number.
func wireFields(t reflect.Type) ([]wireField, error) {
	if t.PkgPath() != thisPkg && !wirePackages[t.PkgPath()] {
		return nil, fmt.Errorf("%v: a type of another package travels only from wirePackages", t)
	}
	var fs []wireField
	seen := map[int]string{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous && sf.Type == versioned {
			continue // the version travels in the header
		}
		tag, ok := sf.Tag.Lookup("kagzi")
		if !ok {
			return nil, fmt.Errorf("%v.%s: no kagzi tag (a field number, or \"-\")", t, sf.Name)
		}
		if tag == "-" {
			continue
		}
		num, err := strconv.Atoi(tag)
		if err != nil || num < 1 {
			return nil, fmt.Errorf("%v.%s: kagzi tag %q is not a field number", t, sf.Name, tag)
		}
		if num == 0 {
			continue
		}
		if other, dup := seen[num]; dup {
			return nil, fmt.Errorf("%v: fields %s and %s both number %d", t, other, sf.Name, num)
		}
		seen[num] = sf.Name
		fs = append(fs, wireField{num: num, name: sf.Name, t: sf.Type})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].num < fs[j].num })
	return fs, nil
}

func (g *codecGen) need(t reflect.Type) {
	if !g.done[t] {
		g.done[t] = true
		g.queue = append(g.queue, t)
	}
}

// field writes the append and decode code of one field.
func (g *codecGen) field(f wireField) (enc, dec string, err error) {
	v := "m." + f.name
	n := f.num
	t := f.t
	switch {
	case t == uuidType:
		return fmt.Sprintf("b = appendUUID(b, %d, %s)", n, v), v + " = r.uuid(w)", nil
	case t == rawType || t == bytesType:
		return fmt.Sprintf("b = appendBytes(b, %d, %s)", n, v), v + " = r.bytes(w)", nil
	case t == timePtrType:
		return fmt.Sprintf("b = appendTime(b, %d, %s)", n, v), v + " = r.time(w)", nil
	case t == int64PtrType:
		return fmt.Sprintf("b = appendIntPtr(b, %d, %s)", n, v), fmt.Sprintf("x := r.int(w)\n%s = &x", v), nil
	case t == stringsType:
		return fmt.Sprintf("for _, s := range %s {\nb = appendStr(b, %d, s)\n}", v, n),
			fmt.Sprintf("%s = append(%s, r.string(w))", v, v), nil
	}
	switch t.Kind() {
	case reflect.String:
		if t.Name() == "string" && t.PkgPath() == "" {
			return fmt.Sprintf("b = appendString(b, %d, %s)", n, v), v + " = r.string(w)", nil
		}
		return fmt.Sprintf("b = appendString(b, %d, string(%s))", n, v),
			fmt.Sprintf("%s = %s(r.string(w))", v, g.typeName(t)), nil
	case reflect.Int:
		return fmt.Sprintf("b = appendInt(b, %d, int64(%s))", n, v), v + " = r.integer(w)", nil
	case reflect.Int64:
		return fmt.Sprintf("b = appendInt(b, %d, %s)", n, v), v + " = r.int(w)", nil
	case reflect.Uint64:
		return fmt.Sprintf("b = appendUint(b, %d, %s)", n, v), v + " = r.uint(w)", nil
	case reflect.Bool:
		return fmt.Sprintf("b = appendBool(b, %d, %s)", n, v), v + " = r.bool(w)", nil
	case reflect.Float64:
		return fmt.Sprintf("b = appendFloat(b, %d, %s)", n, v), v + " = r.float(w)", nil
	case reflect.Struct:
		// Always written: a value, not a pointer, is always there.
		g.need(t)
		name := t.Name()
		return fmt.Sprintf("b, at = openNested(b, %d)\nb = closeNested(append%s(b, &%s), at)", n, name, v),
			fmt.Sprintf("sub := r.sub(w)\nsub.decode%s(&%s)\nr.join(&sub)", name, v), nil
	case reflect.Pointer:
		if e := t.Elem(); e.Kind() == reflect.Struct {
			g.need(e)
			name := e.Name()
			return fmt.Sprintf("if %s != nil {\nb, at = openNested(b, %d)\nb = closeNested(append%s(b, %s), at)\n}", v, n, name, v),
				fmt.Sprintf("%s = &%s{}\nsub := r.sub(w)\nsub.decode%s(%s)\nr.join(&sub)", v, g.typeName(e), name, v), nil
		}
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Struct {
			g.need(e)
			name := e.Name()
			return fmt.Sprintf("for i := range %s {\nb, at = openNested(b, %d)\nb = closeNested(append%s(b, &%s[i]), at)\n}", v, n, name, v),
				fmt.Sprintf("%s = append(%s, %s{})\nsub := r.sub(w)\nsub.decode%s(&%s[len(%s)-1])\nr.join(&sub)",
					v, v, g.typeName(e), name, v, v), nil
		}
	}
	return "", "", fmt.Errorf("field %s: no binary form for %v", f.name, t)
}

// message writes append<T> and (*reader).decode<T>.
func (g *codecGen) message(t reflect.Type) error {
	fs, err := wireFields(t)
	if err != nil {
		return err
	}
	var encs, decs []string
	nested := false
	for _, f := range fs {
		enc, dec, err := g.field(f)
		if err != nil {
			return fmt.Errorf("%v: %w", t, err)
		}
		nested = nested || strings.Contains(enc, "openNested")
		encs = append(encs, enc)
		decs = append(decs, fmt.Sprintf("case %d:\n%s", f.num, dec))
	}
	name, tn := t.Name(), g.typeName(t)
	g.p("func append%s(b []byte, m *%s) []byte {", name, tn)
	if nested {
		g.p("var at int")
	}
	for _, e := range encs {
		g.p("%s", e)
	}
	g.p("return b\n}\n")
	g.p("func (r *reader) decode%s(m *%s) {", name, tn)
	g.p("for {\nf, w, ok := r.next()\nif !ok {\nreturn\n}\nswitch f {")
	for _, d := range decs {
		g.p("%s", d)
	}
	g.p("default:\nr.skip(w)\n}\n}\n}\n")
	return nil
}

func generateCodec() ([]byte, error) {
	g := &codecGen{imports: map[string]bool{}, done: map[reflect.Type]bool{}}
	for _, root := range binaryRoots {
		name := root.t.Name()
		g.p("func (m *%s) binaryType() byte { return %s }\n", name, root.typeTag)
		g.p("func (m *%s) appendBinary(b []byte) []byte { return append%s(b, m) }\n", name, name)
		g.p("func (m *%s) decodeBinary(data []byte) error {\n*m = %s{}\nr := reader{b: data}\nr.decode%s(m)\nreturn r.err\n}\n",
			name, name, name)
		g.need(root.t)
	}
	for len(g.queue) > 0 {
		t := g.queue[0]
		g.queue = g.queue[1:]
		if err := g.message(t); err != nil {
			return nil, err
		}
	}
	var head bytes.Buffer
	head.WriteString("// Code generated by TestBinaryCodecGenerated (go generate); DO NOT EDIT.\n\n")
	head.WriteString("package protocol\n\n")
	if len(g.imports) > 0 {
		paths := make([]string, 0, len(g.imports))
		for p := range g.imports {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		head.WriteString("import (\n")
		for _, p := range paths {
			fmt.Fprintf(&head, "%q\n", p)
		}
		head.WriteString(")\n\n")
	}
	head.Write(g.out.Bytes())
	return format.Source(head.Bytes())
}

// TestBinaryCodecGenerated: binary_gen.go is what the struct tags make.
func TestBinaryCodecGenerated(t *testing.T) {
	want, err := generateCodec()
	if err != nil {
		t.Fatal(err)
	}
	if *updateCodec {
		if err := os.WriteFile(genFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(genFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate ./pkg/protocol/", genFile)
	}
}

// TestWireFieldsChecked: the generator refuses a struct it cannot number.
func TestWireFieldsChecked(t *testing.T) {
	type untagged struct {
		A int `kagzi:"1"`
		B int
	}
	type twice struct {
		A int `kagzi:"1"`
		B int `kagzi:"1"`
	}
	type zero struct {
		A int `kagzi:"0"`
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[untagged](), reflect.TypeFor[twice](), reflect.TypeFor[zero]()} {
		if _, err := wireFields(typ); err == nil {
			t.Errorf("%v accepted", typ)
		}
	}
}
