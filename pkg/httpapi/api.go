package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// MaxBody bounds a request body: one payload of the default limit
// (2 MiB), even escaped, and a few fields. A larger body is refused with
// 413 before it is read whole; a payload above the namespace's payload
// limit is refused likewise by the client.
const MaxBody = 4 << 20

// Prefix is the path every route of the API starts with.
const Prefix = "/v1/"

// Options configure an API.
type Options struct {
	// Store reads the tokens (required).
	Store *store.Store
	// Client returns the client of a namespace (required); every action
	// goes through it.
	Client func(ns string) (*client.Client, error)
	// ReadOnly refuses every write with 403, as the console's read-only
	// mode does.
	ReadOnly bool
}

// API serves the routes of the route table.
type API struct {
	opts   Options
	mux    *http.ServeMux
	limits *limiter
	// served are the patterns given to the mux, in the table's order: the
	// OpenAPI test checks them against the document.
	served []string
	doc    []byte
}

// New returns the API.
func New(opts Options) (*API, error) {
	if opts.Store == nil || opts.Client == nil {
		return nil, errors.New("httpapi: a store and a client factory are required")
	}
	a := &API{opts: opts, mux: http.NewServeMux(), limits: newLimiter(time.Now)}
	doc, err := json.MarshalIndent(Document(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("httpapi: openapi document: %w", err)
	}
	a.doc = append(doc, '\n')
	for _, rt := range Routes() {
		p := rt.Method + " " + rt.Path
		a.served = append(a.served, p)
		a.mux.HandleFunc(p, a.serve(rt))
	}
	return a, nil
}

// ServeHTTP serves a request whose path starts with Prefix.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	a.mux.ServeHTTP(w, r)
}

// apiError is an error with its status and, for 429, its Retry-After.
type apiError struct {
	status     int
	retryAfter int
	msg        string
}

func (e *apiError) Error() string { return e.msg }

func fail(status int, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// ErrorBody is every error's body.
type ErrorBody struct {
	// Error says what was wrong, and what to do about it.
	Error string `json:"error"`
}

// status maps an error to its status code: the API's own, else as
// ErrorStatus maps it.
func status(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return ErrorStatus(err)
}

// ErrorStatus maps the client's and store's typed errors to HTTP status
// codes, for the API and the console alike: 404, 409, 413, 400, 503 for a
// listing that ran out of time, 499 for a request the caller gave up,
// else 500.
func ErrorStatus(err error) int {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNoWorker):
		return http.StatusConflict
	case errors.Is(err, store.ErrPayloadTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, store.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrQueryTimeout):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled):
		return 499
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) && ae.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
	}
	if status(err) == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kagzi"`)
	}
	writeJSON(w, status(err), ErrorBody{Error: err.Error()})
}

// call is one request past the checks: its token's namespace client.
type call struct {
	r  *http.Request
	ns string
	cl *client.Client
}

// serve checks the request (token, namespace, rate, scope, read-only),
// then runs the route.
func (a *API) serve(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rt.Scope == "" {
			code, v, err := rt.handle(a, nil)
			if err != nil {
				writeErr(w, err)
				return
			}
			writeJSON(w, code, v)
			return
		}
		c, err := a.admit(r, rt)
		if err == nil {
			var code int
			var v any
			if code, v, err = rt.handle(a, c); err == nil {
				writeJSON(w, code, v)
				return
			}
		}
		writeErr(w, err)
	}
}

// admit checks a request's token and returns its call; a refused request
// has read nothing of its body and stores nothing.
func (a *API) admit(r *http.Request, rt Route) (*call, error) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(secret) == "" {
		return nil, fail(http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer <secret> (kagzi apitoken create)")
	}
	tok, err := a.opts.Store.APITokensGetBySecret(r.Context(), strings.TrimSpace(secret))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, fail(http.StatusUnauthorized, "unknown bearer token")
	case err != nil:
		return nil, err
	case tok.RevokedAt != nil:
		return nil, fail(http.StatusUnauthorized, "bearer token %q was revoked", tok.Name)
	case tok.Expired:
		return nil, fail(http.StatusUnauthorized, "bearer token %q expired at %s", tok.Name, tok.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if wait, ok := a.limits.take(tok.ID, tok.Rate); !ok {
		return nil, &apiError{status: http.StatusTooManyRequests, retryAfter: wait,
			msg: fmt.Sprintf("bearer token %q is over its rate of %d requests per second (per console process): retry after %d s", tok.Name, tok.Rate, wait)}
	}
	if ns := r.URL.Query().Get("ns"); ns != "" && ns != tok.Namespace {
		return nil, fail(http.StatusForbidden, "bearer token %q is of namespace %q, not %q", tok.Name, tok.Namespace, ns)
	}
	if !tok.Allows(rt.Scope) {
		return nil, fail(http.StatusForbidden, "bearer token %q lacks the scope %s that %s %s needs", tok.Name, rt.Scope, rt.Method, rt.Path)
	}
	if rt.Write && a.opts.ReadOnly {
		return nil, fail(http.StatusForbidden, "the console is read-only")
	}
	cl, err := a.opts.Client(tok.Namespace)
	if err != nil {
		return nil, err
	}
	return &call{r: r, ns: tok.Namespace, cl: cl}, nil
}

// decode reads the request's JSON body into v: at most MaxBody bytes
// (413 above), one object without unknown fields (400 otherwise).
func decode(c *call, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, c.r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("%w: the request body is larger than %d bytes", store.ErrPayloadTooLarge, tooBig.Limit)
		}
		return fmt.Errorf("%w: reading the body: %v", store.ErrInvalidArgument, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: the body is not the JSON object this route takes: %v", store.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: the body holds more than one JSON value", store.ErrInvalidArgument)
	}
	return nil
}
