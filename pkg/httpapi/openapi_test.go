package httpapi_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/httpapi"
	"github.com/kagzi/kagzi/pkg/store"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json from the route table")

const docPath = "../../docs/openapi.json"

// newAPI is an API over no database: the checks of these tests refuse
// every request before a statement would run.
func newAPI(t *testing.T) *httpapi.API {
	t.Helper()
	a, err := httpapi.New(httpapi.Options{Store: store.New(nil, store.Options{}),
		Client: func(string) (*client.Client, error) { return nil, errors.New("no client in this test") }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func served(t *testing.T, a *httpapi.API, method, path string) (int, []byte) {
	t.Helper()
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Code, w.Body.Bytes()
}

// The document and the mux come from one route table: every pattern the
// mux was given is a path and method of the document and the other way
// round; each is served (a request without a token is refused 401, not
// 404 or 405), and what is not in the document is not served.
func TestOpenAPIMatchesTheMux(t *testing.T) {
	a := newAPI(t)
	doc := httpapi.Document()
	var inDoc []string
	for path, ops := range doc["paths"].(map[string]map[string]any) {
		for m := range ops {
			inDoc = append(inDoc, strings.ToUpper(m)+" "+path)
		}
	}
	mux := slices.Clone(a.Served())
	slices.Sort(inDoc)
	slices.Sort(mux)
	if !slices.Equal(inDoc, mux) {
		t.Fatalf("document %v\nmux %v", inDoc, mux)
	}
	if len(mux) < 8 {
		t.Fatalf("only %d routes", len(mux))
	}
	for _, p := range mux {
		method, path, _ := strings.Cut(p, " ")
		path = strings.ReplaceAll(path, "{id}", uuid.NewString())
		code, body := served(t, a, method, path)
		want := http.StatusUnauthorized
		if path == "/v1/openapi.json" {
			want = http.StatusOK
		}
		if code != want {
			t.Errorf("%s %s: %d %s, want %d", method, path, code, body, want)
		}
	}
	for _, p := range [][2]string{{"DELETE", "/v1/runs"}, {"GET", "/v1/nothing"}, {"PUT", "/v1/events"}} {
		if code, _ := served(t, a, p[0], p[1]); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s is served (%d) but not documented", p[0], p[1], code)
		}
	}
}

// docs/openapi.json is the document the code makes (go test
// ./pkg/httpapi -run TestOpenAPIFileIsCurrent -update rewrites it), and
// GET /v1/openapi.json serves it.
func TestOpenAPIFileIsCurrent(t *testing.T) {
	want, err := json.MarshalIndent(httpapi.Document(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(docPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the document the route table makes: go test ./pkg/httpapi -run TestOpenAPIFileIsCurrent -update", docPath)
	}
	code, body := served(t, newAPI(t), http.MethodGet, "/v1/openapi.json")
	var a, b any
	if err := json.Unmarshal(body, &a); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %v", code, err)
	}
	_ = json.Unmarshal(want, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatal("GET /v1/openapi.json serves another document")
	}
	// The schema of a start holds its fields from the Go type.
	start := b.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)["StartRequest"].(map[string]any)
	props := start["properties"].(map[string]any)
	for _, f := range []string{"type", "input", "external_id", "queue"} {
		if props[f] == nil {
			t.Errorf("StartRequest has no property %s", f)
		}
	}
	if !slices.Equal(toStrings(start["required"]), []string{"type"}) {
		t.Errorf("StartRequest requires %v", start["required"])
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// A bucket of rate r takes r requests at once, refuses the next with the
// seconds until one is back, and refills at r per second.
func TestTokenBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	take := httpapi.Take(func() time.Time { return now })
	id := uuid.New()
	for i := range 5 {
		if _, ok := take(id, 5); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	if wait, ok := take(id, 5); ok || wait != 1 {
		t.Fatalf("6th: ok %v, retry after %d", ok, wait)
	}
	if _, ok := take(uuid.New(), 5); !ok {
		t.Fatal("another token's bucket is shared")
	}
	now = now.Add(200 * time.Millisecond)
	if _, ok := take(id, 5); !ok {
		t.Fatal("not refilled after 1/rate")
	}
	if _, ok := take(id, 5); ok {
		t.Fatal("refilled more than one")
	}
}

// docs/http-api.md has a row for every route, with its scope, and no row
// for a route that is not.
func TestHTTPAPIPageListsEveryV1Route(t *testing.T) {
	page, err := os.ReadFile("../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z]+ /v1/[^`]*)` \\| `?([a-z:—]+)`? \\|").FindAllStringSubmatch(string(page), -1) {
		rows[m[1]] = m[2]
	}
	routes := httpapi.Routes()
	for _, rt := range routes {
		scope := cmp.Or(rt.Scope, "—")
		if got, ok := rows[rt.Method+" "+rt.Path]; !ok || got != scope {
			t.Errorf("docs/http-api.md: the row of %s %s is %q, want scope %q", rt.Method, rt.Path, got, scope)
		}
	}
	if len(rows) != len(routes) {
		t.Errorf("docs/http-api.md has %d /v1 rows for %d routes", len(rows), len(routes))
	}
}
