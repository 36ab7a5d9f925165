package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// The console's guard, in front of every route: authentication (basic
// auth or a trusted proxy's header), read-only mode (every write answers
// 403) and CSRF protection (a write must carry the token of its browser's
// cookie in X-CSRF-Token or the csrf_token field, and must not come from
// another site).

const csrfCookie = "kagzi_csrf"

type ctxKey int

const (
	ctxCSRF ctxKey = iota
	ctxUser
	ctxPage // set for HTML pages (vs /api/v1)
)

func isWrite(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

func (c *Console) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		user, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		token := ""
		if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) == 32 {
			token = ck.Value
		}
		if isWrite(r.Method) {
			if c.opts.ReadOnly {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "the console is read-only"})
				return
			}
			sent := r.Header.Get("X-CSRF-Token")
			if sent == "" && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				sent = r.FormValue("csrf_token")
			}
			// Each refusal says which rule refused: a cross-site write
			// with a right token is not a token problem.
			if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": fmt.Sprintf(
					"writes come from the console's own pages or from scripts, not from another site (Sec-Fetch-Site: %s)", protocol.Echo(site))})
				return
			}
			if token == "" || subtle.ConstantTimeCompare([]byte(sent), []byte(token)) != 1 {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "missing or wrong CSRF token (read it from GET /api/v1/csrf)"})
				return
			}
		} else if token == "" {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			token = hex.EncodeToString(b)
			path := c.opts.Prefix
			if path == "" {
				path = "/"
			}
			http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: token, Path: path, HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		}
		ctx := context.WithValue(context.WithValue(r.Context(), ctxCSRF, token), ctxUser, user)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// authenticate returns the user, or answers 401/403 and false.
func (c *Console) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	if c.opts.AuthHeader != "" {
		if len(c.opts.TrustedProxies) > 0 {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				host = r.RemoteAddr
			}
			addr, err := netip.ParseAddr(host)
			trusted := false
			for _, p := range c.opts.TrustedProxies {
				if err == nil && p.Contains(addr.Unmap()) {
					trusted = true
				}
			}
			if !trusted {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "not from a trusted proxy"})
				return "", false
			}
		}
		user := r.Header.Get(c.opts.AuthHeader)
		if user == "" {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "no " + c.opts.AuthHeader + " header from the authenticating proxy"})
			return "", false
		}
		return user, true
	}
	if c.opts.BasicAuth != "" {
		wantU, wantP, _ := strings.Cut(c.opts.BasicAuth, ":")
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(wantU)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(wantP)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="kagzi console", charset="UTF-8"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "authentication required"})
			return "", false
		}
		return u, true
	}
	return "", true
}

func (c *Console) csrfHandler(w http.ResponseWriter, r *http.Request) {
	tok, _ := r.Context().Value(ctxCSRF).(string)
	writeJSON(w, http.StatusOK, map[string]string{"token": tok, "header": "X-CSRF-Token", "cookie": csrfCookie})
}
