package cliutil

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
)

// ParseAttrFlags turns `--attr name=value` flags into attributes (a
// start's, a set-attributes batch's), each value parsed by its kind in
// attrs, the namespace ns's declarations; a keyword given more than once
// is a list.
func ParseAttrFlags(ns string, attrs []store.Attribute, flags []string) (map[string]any, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	var err error
	kinds := map[string]store.AttributeKind{}
	for _, at := range attrs {
		kinds[at.Name] = at.Kind
	}
	out := map[string]any{}
	for _, f := range flags {
		name, val, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, Usagef("--attr %q: give name=value", f)
		}
		k, ok := kinds[name]
		if !ok {
			names := make([]string, 0, len(kinds))
			for n := range kinds {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, Usagef("--attr %s: not declared in namespace %q (declared: %s; kagzi attribute declare)", name, ns, strings.Join(names, ", "))
		}
		var v any
		switch k {
		case store.AttributeKeyword:
			switch prev := out[name].(type) {
			case nil:
				v = val
			case string:
				v = []string{prev, val}
			case []string:
				v = append(prev, val)
			}
		case store.AttributeText:
			v = val
		case store.AttributeInt:
			v, err = strconv.ParseInt(val, 10, 64)
		case store.AttributeFloat:
			v, err = strconv.ParseFloat(val, 64)
		case store.AttributeBool:
			v, err = strconv.ParseBool(val)
		case store.AttributeTime:
			v, err = time.Parse(time.RFC3339Nano, val)
		}
		if err != nil {
			return nil, Usagef("--attr %s=%s: not a %s value: %v", name, val, k, err)
		}
		if _, dup := out[name]; dup && k != store.AttributeKeyword {
			return nil, Usagef("--attr %s given twice; only a keyword holds a list", name)
		}
		out[name] = v
	}
	return out, nil
}
