package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// decision is what completes the approval workflow's token.
type decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// approvalInput is how long the approval workflow's token lives and how
// long it waits for it (0: until the token expires).
type approvalInput struct {
	TTL, Timeout time.Duration
}

// approval mints a token and waits for it.
func approval(ctx workflow.Context, in approvalInput) (string, error) {
	tok, err := workflow.NewWaitToken(ctx, "approval", in.TTL)
	if err != nil {
		return "", err
	}
	d, err := workflow.WaitForToken[decision](ctx, tok, in.Timeout)
	if errors.Is(err, workflow.ErrEventTimeout) {
		return "timed out", nil
	}
	if err != nil {
		return "", err
	}
	if !d.Approved {
		return "rejected by " + d.By, nil
	}
	return "approved by " + d.By, nil
}

// tokenEnv is a system with the approval workflow and a console (behind
// basic auth, which callbacks do not need).
type tokenEnv struct {
	*env
	console string
}

func startTokens(t *testing.T) *tokenEnv {
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return worker.Register(w, "Approval", approval)
	}})
	c, err := console.New(console.Options{Pool: e.srv.Pool, BasicAuth: "admin:secret"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return &tokenEnv{env: e, console: srv.URL}
}

// token starts an Approval run and returns it with the token it minted,
// read from its history once the run waits for it (or, for a short wait,
// ended it).
func (e *tokenEnv) token(t *testing.T, in approvalInput) (*client.Handle, protocol.WaitTokenMinted) {
	t.Helper()
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Approval", in, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var minted protocol.WaitTokenMinted
	waitUntil(t, 30*time.Second, "the run to wait for its token", func() bool {
		r, err := e.srv.Store.RunsGet(ctx, "default", h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := e.srv.Store.StepsList(ctx, "default", h.RunID)
		if err != nil {
			t.Fatal(err)
		}
		waits := false
		for _, s := range steps {
			if s.StepID == "token:approval" {
				if err := json.Unmarshal(s.Output, &minted); err != nil {
					t.Fatal(err)
				}
			}
			waits = waits || (s.Kind == store.StepEvent && s.Status == store.StepPending && s.StepID == "event:"+minted.Event)
		}
		// Suspended in the wait, or (a short wait, on a slow machine)
		// past it already.
		return minted.Token != "" && ((waits && r.Status == store.StatusSleeping) || r.Status.Terminal())
	})
	if minted.Token == "" {
		t.Fatal("no minted token")
	}
	return h, minted
}

// post sends body to the console's callback route for tok.
func (e *tokenEnv) post(t *testing.T, tok, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(e.console+"/callbacks/"+tok, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Error
}

// tokenResult waits for h's result.
func tokenResult(t *testing.T, h *client.Handle) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got string
	if err := h.Result(ctx, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// events is how many events the run holds.
func (e *tokenEnv) events(t *testing.T, run uuid.UUID) int {
	t.Helper()
	list, err := e.srv.Store.EventsList(context.Background(), "default", run)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// A workflow's token completes its wait once, from the client or over
// HTTP; forged, expired and reused tokens are refused with their typed
// errors and statuses and store nothing; a wait with a timeout times out.
func TestWaitTokens(t *testing.T) {
	t.Parallel()
	e := startTokens(t)
	ctx := context.Background()

	// The client completes the first run's token; reuse is refused.
	h, minted := e.token(t, approvalInput{TTL: 24 * time.Hour})
	if left := time.Until(minted.ExpiresAt); left < 23*time.Hour || left > 24*time.Hour+time.Second {
		t.Fatalf("token expires in %s, want 24h", left)
	}
	if _, err := e.cl.CompleteWaitToken(ctx, minted.Token, decision{Approved: true, By: "ada"}); err != nil {
		t.Fatal(err)
	}
	if got := tokenResult(t, h); got != "approved by ada" {
		t.Fatalf("result %q", got)
	}
	if _, err := e.cl.CompleteWaitToken(ctx, minted.Token, decision{By: "eve"}); !errors.Is(err, client.ErrWaitTokenUsed) {
		t.Fatalf("reuse through the client: %v, want ErrWaitTokenUsed", err)
	}
	if code, msg := e.post(t, minted.Token, `{"by": "eve"}`); code != http.StatusConflict || !strings.Contains(msg, "already used") {
		t.Fatalf("reuse over HTTP: %d %q, want 409", code, msg)
	}
	if n := e.events(t, h.RunID); n != 1 {
		t.Fatalf("the first run holds %d events, want 1", n)
	}

	// The second run: forged and expired tokens are refused over HTTP and
	// through the client, storing nothing; then HTTP completes it.
	h, minted = e.token(t, approvalInput{TTL: 24 * time.Hour})
	bad := []byte(minted.Token)
	bad[len(bad)/2] ^= 1 // one character changed
	if code, _ := e.post(t, string(bad), `{}`); code != http.StatusForbidden {
		t.Fatalf("forged token over HTTP: %d, want 403", code)
	}
	if _, err := e.cl.CompleteWaitToken(ctx, string(bad), nil); !errors.Is(err, client.ErrWaitTokenForged) {
		t.Fatalf("forged token through the client: %v", err)
	}
	if code, _ := e.post(t, minted.Token, `{"approved": `); code != http.StatusBadRequest {
		t.Fatalf("a body that is not JSON: %d, want 400", code)
	}
	if code, _ := e.post(t, minted.Token, `"`+strings.Repeat("x", 5<<20)+`"`); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the bound: %d, want 413", code)
	}
	resp, err := http.Get(e.console + "/callbacks/" + minted.Token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET of a callback: %d, want 405", resp.StatusCode)
	}
	if n := e.events(t, h.RunID); n != 0 {
		t.Fatalf("refusals stored %d events", n)
	}
	if code, msg := e.post(t, minted.Token, `{"approved": false, "by": "bob"}`); code != http.StatusOK {
		t.Fatalf("completion over HTTP: %d %q", code, msg)
	}
	if got := tokenResult(t, h); got != "rejected by bob" {
		t.Fatalf("result %q", got)
	}

	// A wait with a timeout that passes.
	h, _ = e.token(t, approvalInput{TTL: 24 * time.Hour, Timeout: 300 * time.Millisecond})
	if got := tokenResult(t, h); got != "timed out" {
		t.Fatalf("result %q, want the wait to time out", got)
	}

	// A token of 2s, waited for without a timeout: the wait ends at its
	// expiry, and the expired token is refused, storing nothing.
	h, minted = e.token(t, approvalInput{TTL: 2 * time.Second})
	if got := tokenResult(t, h); got != "timed out" {
		t.Fatalf("result %q, want the wait to end at the token's expiry", got)
	}
	if !time.Now().After(minted.ExpiresAt) {
		t.Fatalf("the wait ended at %s, before the token's expiry %s", time.Now(), minted.ExpiresAt)
	}
	if code, msg := e.post(t, minted.Token, `{}`); code != http.StatusGone || !strings.Contains(msg, "expired") {
		t.Fatalf("expired token over HTTP: %d %q, want 410", code, msg)
	}
	if _, err := e.cl.CompleteWaitToken(ctx, minted.Token, nil); !errors.Is(err, client.ErrWaitTokenExpired) {
		t.Fatalf("expired token through the client: %v", err)
	}
	if n := e.events(t, h.RunID); n != 0 {
		t.Fatalf("an expired token stored %d events", n)
	}
}

// TestCallbackDocExample runs the curl example of docs/callbacks.md and
// the README's copy as written, each with a token of its own (a token is
// single-use), KAGZI_CONSOLE and TOKEN set: the run wakes with its payload.
func TestCallbackDocExample(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("curl")
	needTool(t, "curl", err)
	e := startTokens(t)
	for _, page := range []string{"../../docs/callbacks.md", "../../README.md"} {
		h, minted := e.token(t, approvalInput{TTL: 24 * time.Hour})
		var ran int
		for _, b := range docBlocks(t, page, "sh") {
			if !strings.Contains(b, "/callbacks/") {
				continue
			}
			ran++
			cmd := exec.Command("bash", "-c", "set -e\n"+b)
			cmd.Env = append(os.Environ(), "KAGZI_CONSOLE="+e.console, "TOKEN="+minted.Token)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: the curl example failed: %v\n%s", page, err, out)
			}
		}
		if ran != 1 {
			t.Fatalf("%d callback curl examples in %s, want 1", ran, page)
		}
		if got := tokenResult(t, h); got != "approved by ada" {
			t.Fatalf("%s: result %q", page, got)
		}
	}
}
