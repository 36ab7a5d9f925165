package dispatcher

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// fill sets every settable field of v (recursively through structs,
// pointers and slices of one element) to a non-zero value derived from
// seed, so a conversion that drops a field shows as a zero on the far side.
func fill(t *testing.T, v reflect.Value, seed *int) {
	t.Helper()
	*seed++
	switch v.Kind() {
	case reflect.Struct:
		switch v.Interface().(type) {
		case time.Time:
			v.Set(reflect.ValueOf(time.Unix(int64(1700000000+*seed), 0).UTC()))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), seed)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), seed)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(`"x"`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), seed)
	case reflect.Array: // uuid.UUID
		for i := 0; i < v.Len(); i++ {
			v.Index(i).SetUint(uint64(*seed + i))
		}
	case reflect.String:
		v.SetString("s" + string(rune('a'+*seed%26)))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*seed))
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	default:
		t.Fatalf("fill: unhandled kind %s", v.Kind())
	}
}

// Fields of a claimed run that a worker does not receive, and why. A new
// field of store.ClaimedRun must be delivered or listed here.
var notDelivered = map[string]string{
	"ExternalID": "the application's key, not needed to execute", "Status": "always RUNNING when delivered",
	"AvailableAt": "cleared by the claim; DueAt is sent", "LockedBy": "the worker itself",
	"LeaseExpiresAt": "extended by heartbeats, not the worker's concern", "Error": "the previous attempt's, not replayed",
	"CreatedAt": "bookkeeping", "StartedAt": "bookkeeping", "FinishedAt": "never set on a running run",
	"ParentRunID": "not used by replay", "ParentStepID": "not used by replay",
	"CronExpr": "templates are never claimed", "Timezone": "templates are never claimed",
	"MaxCatchup": "templates are never claimed", "LastFiredAt": "templates are never claimed",
	"ScheduleID": "not used by replay", "ScheduleFireAt": "not used by replay", "Priority": "used by the claim only",
	"Output": "a running run has none", "Attempts": "counts lost executions too: the engine's limit, not the workflow's",
	"ParentClosePolicy": "applied by the engine when the parent ends",
	"ContinuedAs":       "set only on a run that ended",
	"DebounceKey":       "how the run was started, not used by replay",
	"DebounceStarts":    "how the run was started, not used by replay",
	"ConcurrencyKey":    "applied by the claim, not used by replay",
	"RateLimitKey":      "applied by the claim, not used by replay",
	"ForkedFrom":        "fork links are the client's reading, never claimed",
	"ForkedAtStep":      "fork links are the client's reading, never claimed",
	"Forks":             "fork links are the client's reading, never claimed",
	"Paused":            "a paused run is not claimed; a pause that comes while it runs is told by the step report's answer",
}

// Wire names of claimed-run fields that are renamed on the wire.
var renamed = map[string]string{
	"ID": "RunID", "Epoch": "Attempt", "TraceContext": "TraceParent", "DueAt": "AvailableAt",
}

// flatFields lists the exported fields of t, with embedded structs' fields
// promoted.
func flatFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, flatFields(f.Type)...)
			continue
		}
		if f.IsExported() {
			out = append(out, f)
		}
	}
	return out
}

// Every field of a claimed run and of each of its steps reaches the wire
// (or is listed as deliberately kept back), with its value: the replay of
// a failed step depends on its error type, retry time, run attempt and
// tries, and a conversion that copied only some of them made failures
// loop. This fails as soon as either type gains a field the conversion
// does not carry.
func TestDeliveredRunCarriesEveryField(t *testing.T) {
	var c store.ClaimedRun
	seed := 0
	fill(t, reflect.ValueOf(&c).Elem(), &seed)
	c.RetryPolicy = &retry.Policy{MaxAttempts: 3}
	c.ID = uuid.New()
	d := deliveredRun(&c)

	wire := reflect.ValueOf(d)
	src := reflect.ValueOf(c)
	seen := map[string]bool{}
	for _, f := range flatFields(reflect.TypeOf(c)) {
		if f.Name == "Steps" {
			seen["Steps"] = true
			continue
		}
		if why, ok := notDelivered[f.Name]; ok {
			if why == "" {
				t.Fatalf("%s: no reason given", f.Name)
			}
			continue
		}
		name := f.Name
		if n, ok := renamed[name]; ok {
			name = n
		}
		wf := wire.FieldByName(name)
		if !wf.IsValid() {
			t.Errorf("store.ClaimedRun.%s has no field %s on the wire and is not listed as kept back", f.Name, name)
			continue
		}
		seen[name] = true
		if !sameValue(src.FieldByName(f.Name), wf) {
			t.Errorf("%s: store %v, wire %v", f.Name, src.FieldByName(f.Name).Interface(), wf.Interface())
		}
	}
	for _, f := range flatFields(reflect.TypeOf(d)) {
		if !seen[f.Name] {
			t.Errorf("protocol.DeliveredRun.%s is filled from nothing", f.Name)
		}
	}

	if len(d.Steps) != 1 {
		t.Fatalf("%d steps delivered, want 1", len(d.Steps))
	}
	ss, ws := reflect.ValueOf(c.Steps[0]), reflect.ValueOf(d.Steps[0])
	for _, f := range flatFields(ss.Type()) {
		wf := ws.FieldByName(f.Name)
		if !wf.IsValid() {
			t.Errorf("store.StepState.%s has no field on the wire", f.Name)
			continue
		}
		if !sameValue(ss.FieldByName(f.Name), wf) {
			t.Errorf("step %s: store %v, wire %v", f.Name, ss.FieldByName(f.Name).Interface(), wf.Interface())
		}
	}
	for _, f := range flatFields(ws.Type()) {
		if !ss.FieldByName(f.Name).IsValid() {
			t.Errorf("protocol.StepState.%s is filled from nothing", f.Name)
		}
	}
	// And the delivery encodes: what the dispatcher sends is valid. (A
	// claim returns a payload or its size, never both.)
	d.InputSize = 0
	for i := range d.Steps {
		d.Steps[i].OutputSize = 0
	}
	if _, err := protocol.Encode(&protocol.Delivery{WorkerID: uuid.New(), Runs: []protocol.DeliveredRun{d},
		Limits: protocol.PayloadLimits{WarnBytes: 1, MaxBytes: 1}}); err != nil {
		t.Fatalf("delivery does not encode: %v", err)
	}
}

// sameValue compares a store value with its wire form: equal after
// converting named string types, byte slices to raw JSON, and values to
// pointers where the wire uses one.
func sameValue(a, b reflect.Value) bool {
	if a.Kind() != reflect.Pointer && b.Kind() == reflect.Pointer {
		if b.IsNil() {
			return false
		}
		b = b.Elem()
	}
	if a.Kind() == reflect.String && b.Kind() == reflect.String {
		return a.String() == b.String()
	}
	if a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Uint8 {
		return string(a.Bytes()) == string(b.Bytes())
	}
	if a.Type().ConvertibleTo(b.Type()) {
		return reflect.DeepEqual(a.Convert(b.Type()).Interface(), b.Interface())
	}
	return false
}
