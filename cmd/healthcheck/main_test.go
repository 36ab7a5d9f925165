package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			_, _ = w.Write([]byte("ok\n"))
		default:
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ok", []string{srv.URL + "/healthz"}, 0, ""},
		{"not ok", []string{srv.URL + "/readyz"}, 1, "503"},
		{"refused", []string{"http://127.0.0.1:1/healthz"}, 1, "healthcheck:"},
		{"bad url", []string{"::nope"}, 1, "healthcheck:"},
		{"usage", []string{"a", "b"}, 2, "usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != tc.code {
				t.Fatalf("run(%q) = %d, want %d (stderr %q)", tc.args, code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.msg) {
				t.Fatalf("stderr %q, want it to contain %q", stderr.String(), tc.msg)
			}
		})
	}
}

func TestProbeTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	start := time.Now()
	if err := probe(srv.URL, 200*time.Millisecond); err == nil {
		t.Fatal("probe of a server that never answers succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("probe took %v, want about the 200ms timeout", d)
	}
}
