package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The OpenAPI 3 document is made from the route table: paths, methods,
// parameters and scopes from Routes, and the schemas of the bodies from
// their Go types by reflection. The standard library is enough for the
// few kinds the types use (structs with json tags, strings, numbers,
// booleans, slices, maps, pointers, time.Time, uuid.UUID,
// json.RawMessage), so no schema library is linked.

// Version is the API's version in the document.
const Version = "1.0.0"

var (
	timeType = reflect.TypeOf(time.Time{})
	uuidType = reflect.TypeOf(uuid.UUID{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// schemas collects the named schemas of the document's components.
type schemas map[string]any

// of returns the schema of t, a reference for a named struct (added to
// s once).
func (s schemas) of(t reflect.Type) map[string]any {
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case uuidType:
		return map[string]any{"type": "string", "format": "uuid"}
	case rawType:
		return map[string]any{"description": "any JSON value"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return s.of(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": s.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.of(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if _, ok := s[t.Name()]; !ok {
			s[t.Name()] = nil // a type that refers to itself stops here
			s[t.Name()] = s.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + t.Name()}
	}
	panic("httpapi: no schema for " + t.String())
}

// object is the schema of a struct: its exported fields under their JSON
// names; those without omitempty are required.
func (s schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = s.of(f.Type)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func jsonContent(schema map[string]any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schema}}
}

// Document returns the OpenAPI 3 document of the route table.
func Document() map[string]any {
	s := schemas{}
	errRef := s.of(reflect.TypeOf(ErrorBody{}))
	paths := map[string]map[string]any{}
	for _, rt := range Routes() {
		op := map[string]any{"summary": rt.Summary, "operationId": operationID(rt)}
		var params []any
		for _, p := range rt.Params {
			params = append(params, map[string]any{"name": p.Name, "in": p.In, "required": p.In == "path",
				"description": p.Description, "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.Request != nil {
			op["requestBody"] = map[string]any{"required": true, "content": jsonContent(s.of(reflect.TypeOf(rt.Request)))}
		}
		resp := map[string]any{strconv.Itoa(rt.Status): map[string]any{"description": http.StatusText(rt.Status),
			"content": jsonContent(s.of(reflect.TypeOf(rt.Response)))}}
		if rt.Status == http.StatusCreated {
			resp["200"] = map[string]any{"description": "found existing", "content": jsonContent(s.of(reflect.TypeOf(rt.Response)))}
		}
		codes := []int{http.StatusInternalServerError}
		if rt.Scope != "" {
			op["security"] = []any{map[string]any{"bearer": []string{}}}
			op["x-kagzi-scope"] = rt.Scope
			codes = append(codes, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
				http.StatusConflict, http.StatusTooManyRequests)
			if rt.Request != nil {
				codes = append(codes, http.StatusRequestEntityTooLarge)
			}
		}
		for _, c := range codes {
			resp[strconv.Itoa(c)] = map[string]any{"description": http.StatusText(c), "content": jsonContent(errRef)}
		}
		op["responses"] = resp
		if paths[rt.Path] == nil {
			paths[rt.Path] = map[string]any{}
		}
		paths[rt.Path][strings.ToLower(rt.Method)] = op
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "Kagzi HTTP API", "version": Version,
			"description": "The HTTP API for machine clients, served by the web console under /v1/ (docs/http-api.md). " +
				"Every route but this document needs a bearer token (kagzi apitoken create) of the namespace with the route's scope (x-kagzi-scope)."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         s,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

// operationID names a route for code generators: its method and path,
// e.g. get_v1_runs_id_result.
func operationID(rt Route) string {
	r := strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_")
	return strings.ToLower(rt.Method) + r.Replace(rt.Path)
}
