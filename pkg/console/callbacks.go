package console

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/kagzi/kagzi/pkg/httpapi"
	"github.com/kagzi/kagzi/pkg/store"
)

// Callbacks: POST /callbacks/{token} completes a wait token
// (workflow.NewWaitToken) with the request's body as its JSON payload.
// The token is the credential, so the route is outside the console's
// guard: no login, no CSRF token, any site (a webhook sender). Only
// read-only mode refuses it, as every write.

// callbackRoutes serves /callbacks/ and /webhooks/ (webhooks.go), whose
// signatures are their credentials likewise.
func (c *Console) callbackRoutes() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("POST /callbacks/{token}", c.completeCallback)
	m.HandleFunc("POST /webhooks/{source}", c.receiveWebhook)
	return m
}

// withCallbacks routes /callbacks/ and /webhooks/ past the guard to the
// callback routes, and /v1/ to the HTTP API for machine clients (package
// httpapi), whose bearer token is its credential.
func (c *Console) withCallbacks(guarded http.Handler) http.Handler {
	cb := c.callbackRoutes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/callbacks/") || strings.HasPrefix(r.URL.Path, "/webhooks/") {
			h := w.Header()
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Cache-Control", "no-store")
			cb.ServeHTTP(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, httpapi.Prefix) {
			c.machine.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// callbackStatus maps a completion's error to its status: 403 for a
// forged token, 410 for an expired one, 409 for a used one (or one whose
// run finished), else as the API does (400, 413).
func callbackStatus(err error) int {
	switch {
	case errors.Is(err, store.ErrWaitTokenForged):
		return http.StatusForbidden
	case errors.Is(err, store.ErrWaitTokenExpired):
		return http.StatusGone
	}
	return httpapi.ErrorStatus(err)
}

func (c *Console) completeCallback(w http.ResponseWriter, r *http.Request) {
	if c.opts.ReadOnly {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "the console is read-only"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeErr(w, bodyErr(err))
		return
	}
	cl, err := c.client(c.opts.Namespace)
	if err == nil {
		var payload any
		if len(body) > 0 {
			payload = json.RawMessage(body)
		}
		if _, err = cl.CompleteWaitToken(r.Context(), r.PathValue("token"), payload); err == nil {
			writeJSON(w, http.StatusOK, map[string]bool{"completed": true})
			return
		}
	}
	writeJSON(w, callbackStatus(err), map[string]string{"error": err.Error()})
}
