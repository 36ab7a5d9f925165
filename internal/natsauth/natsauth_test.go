package natsauth_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/natsauth"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/tests/testnats"
)

// violations waits until the server refused every one of subjects
// (publish or subscribe, as errs reports them).
func violations(t *testing.T, errs <-chan error, subjects ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, s := range subjects {
		want[s] = true
	}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case err := <-errs:
			msg := strings.ToLower(err.Error())
			if !strings.Contains(msg, "permissions violation") {
				t.Fatalf("unexpected error %v", err)
			}
			for s := range want {
				if strings.Contains(err.Error(), `"`+s+`"`) {
					delete(want, s)
				}
			}
		case <-deadline:
			t.Fatalf("no permission violation for %v", want)
		}
	}
}

func subscribe(t *testing.T, nc *nats.Conn, subj string) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subj)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func next(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("%s: %v", sub.Subject, err)
	}
	return m
}

func flush(t *testing.T, ncs ...*nats.Conn) {
	t.Helper()
	for _, nc := range ncs {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorkerIsConfinedToItsNamespaceAndInbox: with the generated
// configuration, a worker of namespace a cannot subscribe to b's
// deliveries or cancels, to another worker's inbox (of b or of a), or to
// anyone's requests and reports; a message sent there does not reach it,
// while its own inbox does.
func TestWorkerIsConfinedToItsNamespaceAndInbox(t *testing.T) {
	t.Parallel()
	s := testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"a", "b"}, Workers: []string{"a/w1", "a/w2", "b/w1"}})
	errs := make(chan error, 64)
	w := s.ConnectAs(t, errs, protocol.RoleWorker, "a", "w1")
	obs := s.ConnectAs(t, nil, testnats.Observer, "", "")
	forbidden := []string{
		protocol.WorkerInbox("b", "w1") + ".>",
		protocol.WorkerInbox("a", "w2") + ".>",
		protocol.SubjectCancel("b", uuid.New()),
		protocol.SubjectInboxAll,
		"_INBOX.>",
		protocol.SubjectWorkAll,
		protocol.SubjectReportAll,
		protocol.SubjectDoneAll,
	}
	subs := make([]*nats.Subscription, len(forbidden))
	for i, f := range forbidden {
		subs[i] = subscribe(t, w, f)
	}
	own := subscribe(t, w, protocol.WorkerInbox("a", "w1")+".>")
	flush(t, w)
	violations(t, errs, forbidden...)
	// What the others would have received, then what w may receive, from
	// one connection in order: w's own arrives after any of the others.
	for _, subj := range []string{protocol.WorkerInbox("b", "w1") + ".x", protocol.WorkerInbox("a", "w2") + ".x",
		protocol.SubjectWork("b", "q"), protocol.SubjectReport("b"), protocol.SubjectDone("b", uuid.New())} {
		if err := obs.Publish(subj, []byte("secret")); err != nil {
			t.Fatal(err)
		}
	}
	if err := obs.Publish(protocol.WorkerInbox("a", "w1")+".x", []byte("yours")); err != nil {
		t.Fatal(err)
	}
	if m := next(t, own); string(m.Data) != "yours" {
		t.Fatalf("own inbox got %q", m.Data)
	}
	for i, sub := range subs {
		if n, _, _ := sub.Pending(); n != 0 {
			t.Errorf("worker of a received %d messages on %s", n, forbidden[i])
		}
	}
}

// TestWorkerCannotSpeakForAnotherNamespace: a worker of a cannot publish
// b's reports, heartbeats, registrations, deregistrations, payload or work
// requests, nor anything a service publishes; the same from its own
// namespace goes through.
func TestWorkerCannotSpeakForAnotherNamespace(t *testing.T) {
	t.Parallel()
	s := testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"a", "b"}})
	errs := make(chan error, 64)
	w := s.ConnectAs(t, errs, protocol.RoleWorker, "a", "worker")
	obs := s.ConnectAs(t, nil, testnats.Observer, "", "")
	all := subscribe(t, obs, protocol.Prefix+">")
	flush(t, obs)
	forbidden := []string{
		protocol.SubjectReport("b"), protocol.SubjectWorkerHeartbeat("b"), protocol.SubjectWorkerRegister("b"),
		protocol.SubjectWorkerDeregister("b"), protocol.SubjectPayload("b"), protocol.SubjectWork("b", "q"),
		protocol.SubjectReady("a", "q"), protocol.SubjectDone("a", uuid.New()), protocol.SubjectCancel("a", uuid.New()),
		protocol.SubjectRelayUp, protocol.SubjectDispatcherBeacon, protocol.WorkerInbox("a", "w2") + ".x",
	}
	for _, f := range forbidden {
		if err := w.Publish(f, []byte("forged")); err != nil {
			t.Fatal(err)
		}
	}
	allowed := []string{protocol.SubjectReport("a"), protocol.SubjectWorkerHeartbeat("a"), protocol.SubjectWork("a", "q")}
	for _, a := range allowed {
		if err := w.Publish(a, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, w)
	violations(t, errs, forbidden...)
	for _, a := range allowed {
		m := next(t, all)
		if m.Subject != a || string(m.Data) != "ok" {
			t.Fatalf("observer got %s %q, want %s: a forged message went through", m.Subject, m.Data, a)
		}
	}
}

// TestClientReadsOnlyItsNamespace: a client of a receives a's results and
// not b's, and publishes nothing but drain requests to a's workers.
func TestClientReadsOnlyItsNamespace(t *testing.T) {
	t.Parallel()
	s := testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"a", "b"}})
	errs := make(chan error, 64)
	c := s.ConnectAs(t, errs, protocol.RoleClient, "a", "")
	obs := s.ConnectAs(t, nil, testnats.Observer, "", "")
	runB, runA := uuid.New(), uuid.New()
	theirs := subscribe(t, c, protocol.SubjectDone("b", runB))
	own := subscribe(t, c, protocol.SubjectDone("a", runA))
	drainB := protocol.SubjectCancel("b", uuid.New())
	for _, subj := range []string{protocol.SubjectReport("a"), drainB} {
		if err := c.Publish(subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, c)
	violations(t, errs, protocol.SubjectDone("b", runB), protocol.SubjectReport("a"), drainB)
	_ = obs.Publish(protocol.SubjectDone("b", runB), []byte("b's"))
	_ = obs.Publish(protocol.SubjectDone("a", runA), []byte("a's"))
	if m := next(t, own); string(m.Data) != "a's" {
		t.Fatalf("got %q", m.Data)
	}
	if n, _, _ := theirs.Pending(); n != 0 {
		t.Errorf("client of a received %d of b's results", n)
	}
}

// TestServicesPublishOnlyWhatTheyOwn: the scheduler, the reaper and the
// console publish none of the engine's notifications (the console only
// drain requests); the dispatcher may publish what the relay relays and
// deliveries.
func TestServicesPublishOnlyWhatTheyOwn(t *testing.T) {
	t.Parallel()
	s := testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"a"}})
	for _, role := range []string{protocol.RoleScheduler, protocol.RoleReaper, protocol.RoleConsole} {
		errs := make(chan error, 8)
		nc := s.ConnectAs(t, errs, role, "", "")
		subj := protocol.SubjectReady("a", "q")
		_ = nc.Publish(subj, nil)
		flush(t, nc)
		violations(t, errs, subj)
	}
	errs := make(chan error, 8)
	d := s.ConnectAs(t, errs, protocol.RoleDispatcher, "", "")
	obs := s.ConnectAs(t, nil, testnats.Observer, "", "")
	got := subscribe(t, obs, protocol.Prefix+">")
	flush(t, obs)
	pubs := []string{protocol.SubjectReady("a", "q"), protocol.WorkerInbox("a", "worker") + ".x"}
	for _, p := range pubs {
		_ = d.Publish(p, nil)
	}
	for _, p := range pubs {
		if m := next(t, got); m.Subject != p {
			t.Fatalf("got %s, want %s", m.Subject, p)
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("dispatcher: %v", err)
	default:
	}
}

func TestConfigFailsOnCollidingUsers(t *testing.T) {
	t.Parallel()
	if _, err := natsauth.Config(natsauth.Options{Workers: []string{"a/w1-x", "a-w1/x"}}); err == nil {
		t.Error("two users sharing a password variable accepted")
	}
	if _, err := natsauth.Config(natsauth.Options{Workers: []string{"a"}}); err == nil {
		t.Error("worker without identity accepted")
	}
	conf, err := natsauth.Config(natsauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"dispatcher", "scheduler", "reaper", "console", "client-default", "worker-default-worker"} {
		if !strings.Contains(conf, fmt.Sprintf("user: %q", u)) {
			t.Errorf("default configuration has no user %s", u)
		}
	}
}

// hardPasswords are passwords nats-server misreads when it parses them as
// configuration values, unquoted: numbers, sizes, dates, booleans,
// another variable, syntax, blanks, escapes, control characters. "1abc"
// is what the pinned server does read unquoted; it is here all the same.
var hardPasswords = []string{
	"123456", "1abc", "1-2", "1.5", "1k", "3mb", "1e", "0123", "12345678-90ab-cdef-0123-456789abcdef",
	"true", "no", "$HOME", "a b", " lead", "trail ", "x}y", "[x", "a,b", "a;b", `q"uo\te`, `'single`,
	"line\nbreak", "tab\there", "bell\a", "é-ünï", "(x\n)",
}

// TestAnyPasswordFromTheEnvironment: the generated configuration reads
// each user's password from KAGZI_NATS_PASSWORD_<USER>, and a real
// nats-server takes any password there, quoted by Quote: each user gets
// in with its own and not with another's.
func TestAnyPasswordFromTheEnvironment(t *testing.T) {
	// Namespaces enough for a user per password.
	o := natsauth.Options{Namespaces: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}}
	users, err := natsauth.Users(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) < len(hardPasswords) {
		t.Fatalf("%d users for %d passwords", len(users), len(hardPasswords))
	}
	conf, err := natsauth.Config(o)
	if err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{}
	for i, u := range users {
		p := hardPasswords[i%len(hardPasswords)]
		pw[u.Name] = p
		// nats-server inherits the test's environment.
		t.Setenv(u.PasswordVar, natsauth.Quote(p))
	}
	checkPasswords(t, testnats.StartConfig(t, conf).URL(), users, pw, hardPasswords)
}

// checkPasswords checks that each user gets into the server at url with
// its password pw[name], and not with the next one of passwords.
func checkPasswords(t *testing.T, url string, users []natsauth.User, pw map[string]string, passwords []string) {
	t.Helper()
	for i, u := range users {
		nc, err := nats.Connect(url, nats.UserInfo(u.Name, pw[u.Name]), nats.NoReconnect())
		if err != nil {
			t.Errorf("user %s with password %q: %v", u.Name, pw[u.Name], err)
			continue
		}
		nc.Close()
		other := passwords[(i+1)%len(passwords)]
		if nc, err := nats.Connect(url, nats.UserInfo(u.Name, other), nats.NoReconnect()); err == nil {
			nc.Close()
			t.Errorf("user %s got in with another's password %q", u.Name, other)
		}
	}
}

// TestAnyLiteralPassword: a password written into the configuration
// (Options.Passwords, what the test servers use) reaches nats-server as
// it is, whatever its characters.
func TestAnyLiteralPassword(t *testing.T) {
	t.Parallel()
	users, err := natsauth.Users(natsauth.Options{Namespaces: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}})
	if err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{}
	for i, u := range users {
		pw[u.Name] = hardPasswords[i%len(hardPasswords)] + "\x01\x7f"
	}
	s := testnats.StartConfig(t, natsauth.Render(users, pw, natsauth.TLS{}))
	for _, u := range users {
		nc, err := nats.Connect(s.URL(), nats.UserInfo(u.Name, pw[u.Name]), nats.NoReconnect())
		if err != nil {
			t.Errorf("user %s with password %q: %v", u.Name, pw[u.Name], err)
			continue
		}
		nc.Close()
	}
}

// startScript is the script compose and the Kubernetes dev overlay start
// nats-server with.
const startScript = "../../deploy/nats/start.sh"

// TestStartScriptTakesAnyPassword: deploy/nats/start.sh quotes each
// KAGZI_NATS_PASSWORD_<USER> before nats-server reads it, so the operator
// sets a password once, bare, for nats-server and for the service alike:
// every hard password (but control characters other than tab, newline and
// carriage return) gets its user in, and only its user. It runs with the
// machine's sh and awk and, where busybox is installed, with busybox's,
// which nats:2-alpine has.
func TestStartScriptTakesAnyPassword(t *testing.T) {
	shells := map[string][]string{"sh": {"sh", startScript}}
	if bb, err := exec.LookPath("busybox"); err == nil {
		dir := t.TempDir()
		for _, applet := range []string{"sh", "awk"} {
			if err := os.Symlink(bb, filepath.Join(dir, applet)); err != nil {
				t.Fatal(err)
			}
		}
		shells["busybox"] = []string{filepath.Join(dir, "sh"), startScript}
		// The script's awk is busybox's too.
		t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	} else {
		t.Log("busybox not installed: the script runs with sh only")
	}
	var passwords []string
	for _, p := range hardPasswords {
		if !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 && !strings.ContainsRune("\t\n\r", r) }) {
			passwords = append(passwords, p)
		}
	}
	o := natsauth.Options{Namespaces: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}}
	users, err := natsauth.Users(o)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := natsauth.Config(o)
	if err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{}
	for i, u := range users {
		pw[u.Name] = passwords[i%len(passwords)]
		// Bare, as the services read it; the server inherits it.
		t.Setenv(u.PasswordVar, pw[u.Name])
	}
	for name, via := range shells {
		t.Run(name, func(t *testing.T) {
			checkPasswords(t, testnats.StartVia(t, conf, via...).URL(), users, pw, passwords)
		})
	}
}
