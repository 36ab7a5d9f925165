package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func TestSubjectBuilders(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{protocol.SubjectReady("ns", "q"), "kagzi.v1.ready.ns.q"},
		{protocol.SubjectDone("ns", id1), "kagzi.v1.done.ns." + id1.String()},
		{protocol.SubjectCancel("ns", id2), "kagzi.v1.cancel.ns." + id2.String()},
		{protocol.SubjectSchedule("ns"), "kagzi.v1.schedule.ns"},
		{protocol.SubjectWork("ns", "q"), "kagzi.v1.work.ns.q"},
		{protocol.SubjectReport("ns"), "kagzi.v1.report.ns"},
		{protocol.SubjectReadyAll, "kagzi.v1.ready.>"},
		{protocol.SubjectDoneAll, "kagzi.v1.done.>"},
		{protocol.SubjectScheduleAll, "kagzi.v1.schedule.>"},
		{protocol.SubjectWorkAll, "kagzi.v1.work.>"},
		{protocol.SubjectReportAll, "kagzi.v1.report.>"},
		{protocol.SubjectRelayUp, "kagzi.v1.relay.up"},
		{protocol.SubjectDispatcherBeacon, "kagzi.v1.dispatcher.beacon"},
		{protocol.SubjectDispatcherProbe, "kagzi.v1.dispatcher.probe"},
		{protocol.SubjectWorkerRegister("ns"), "kagzi.v1.worker.register.ns"},
		{protocol.SubjectWorkerHeartbeat("ns"), "kagzi.v1.worker.heartbeat.ns"},
		{protocol.SubjectWorkerDeregister("ns"), "kagzi.v1.worker.deregister.ns"},
		{protocol.WorkerInbox("ns", "w1"), "kagzi.v1.inbox.worker.ns.w1"},
		{protocol.ClientInbox("ns"), "kagzi.v1.inbox.client.ns"},
		{protocol.ServiceInbox(protocol.RoleDispatcher), "kagzi.v1.inbox.dispatcher"},
		{protocol.SubjectReaperUp, "kagzi.v1.reaper.up"},
		{protocol.SubjectRegistration("ns", id2), "kagzi.v1.registration.ns." + id2.String()},
		{protocol.SubjectRegistrationAll, "kagzi.v1.registration.>"},
	} {
		if c.got != c.want {
			t.Errorf("subject %q, want %q", c.got, c.want)
		}
	}
}

// matches reports whether subject matches a NATS wildcard pattern.
func matches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(p) == len(s)
}

func TestSubjectsMatchTheirWildcards(t *testing.T) {
	for _, c := range []struct {
		subject, pattern string
		tokens           int
	}{
		{protocol.SubjectReady("ns", "q"), protocol.SubjectReadyAll, 5},
		{protocol.SubjectDone("ns", id1), protocol.SubjectDoneAll, 5},
		{protocol.SubjectSchedule("ns"), protocol.SubjectScheduleAll, 4},
		{protocol.SubjectWork("ns", "q"), protocol.SubjectWorkAll, 5},
		{protocol.SubjectReport("ns"), protocol.SubjectReportAll, 4},
		{protocol.SubjectCancel("ns", id1), protocol.SubjectCancelAll, 5},
		{protocol.SubjectCancel("ns", id1), protocol.SubjectCancelNamespace("ns"), 5},
		{protocol.SubjectDone("ns", id1), protocol.SubjectDoneNamespace("ns"), 5},
		{protocol.SubjectWorkerRegister("ns"), protocol.SubjectWorkerRegisterAll, 5},
		{protocol.SubjectWorkerHeartbeat("ns"), protocol.SubjectWorkerHeartbeatAll, 5},
		{protocol.SubjectWorkerDeregister("ns"), protocol.SubjectWorkerDeregisterAll, 5},
		{protocol.WorkerInbox("ns", "w") + ".x", protocol.SubjectInboxAll, 7},
		{protocol.SubjectRegistration("ns", id1), protocol.SubjectRegistrationAll, 5},
		{protocol.SubjectRegistration("ns", id1), protocol.SubjectRegistrationNamespace("ns"), 5},
	} {
		if !matches(c.pattern, c.subject) {
			t.Errorf("%q does not match %q", c.subject, c.pattern)
		}
		if n := len(strings.Split(c.subject, ".")); n != c.tokens {
			t.Errorf("%q has %d tokens, want %d", c.subject, n, c.tokens)
		}
	}
	// The roots do not overlap.
	if matches(protocol.SubjectReadyAll, protocol.SubjectWork("ns", "q")) || matches(protocol.SubjectWorkAll, protocol.SubjectReady("ns", "q")) {
		t.Error("ready and work subjects overlap")
	}
}

type parseFunc func(string) (string, string, error)

var parsers = []struct {
	name  string
	parse parseFunc
	build func(ns, q string) string
	other parseFunc // the parser for the other root, which must refuse
}{
	{"ready", protocol.ParseReady, protocol.SubjectReady, protocol.ParseWork},
	{"work", protocol.ParseWork, protocol.SubjectWork, protocol.ParseReady},
}

func TestParseRoundTrip(t *testing.T) {
	for _, p := range parsers {
		for _, c := range [][2]string{{"ns", "q"}, {"default", "emails"}, {token200, token200}, {"名前", "é-_~"}, {"a-b", "c_d"}, {"$sys", "#1"}} {
			subj := p.build(c[0], c[1])
			ns, q, err := p.parse(subj)
			if err != nil || ns != c[0] || q != c[1] {
				t.Errorf("%s: parse(%q) = %q, %q, %v", p.name, subj, ns, q, err)
			}
			if _, _, err := p.other(subj); !errors.Is(err, protocol.ErrInvalid) {
				t.Errorf("%s: the other parser accepted %q: %v", p.name, subj, err)
			}
		}
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, p := range parsers {
		root := protocol.Prefix + p.name + "."
		for _, subj := range []string{
			"",
			root,
			root + "ns",
			root + "ns.",
			root + ".q",
			root + "..",
			root + "ns..q",
			root + "ns.q.",
			root + "ns.q.extra",
			root + "ns.*",
			root + "*.q",
			root + "ns.>",
			root + ">",
			root + "n s.q",
			root + "ns.q ",
			root + "ns.q\n",
			root + "ns\t.q",
			root + "ns@x.q",
			root + "ns.q\x00",
			root + "ns.q\x7f",
			root + "ns.\xff",
			root + "ns.a\u200bb",
			root + strings.Repeat("n", 201) + ".q",
			root + "ns." + strings.Repeat("q", 201),
			strings.ToUpper(root) + "ns.q",
			"kagzi.v2." + p.name + ".ns.q",
			"kagzi.v1." + p.name + "s.ns.q",
			"x" + root + "ns.q",
			" " + root + "ns.q",
			protocol.Prefix + "done.ns.q",
			protocol.SubjectReadyAll,
			protocol.SubjectWorkAll,
		} {
			ns, q, err := p.parse(subj)
			if !errors.Is(err, protocol.ErrInvalid) {
				t.Errorf("%s: parse(%q) = %q, %q, %v; want ErrInvalid", p.name, subj, ns, q, err)
			}
			if err != nil && (ns != "" || q != "") {
				t.Errorf("%s: parse(%q) failed but returned %q, %q", p.name, subj, ns, q)
			}
		}
	}
}

func TestValidToken(t *testing.T) {
	for _, s := range []string{"a", "default", token200, "名前", strings.Repeat("é", 100), "a-b_c~d", "$SYS", "#", "<", "a&b", "\ufffd", "🙂"} {
		if err := protocol.ValidToken("namespace", s); err != nil {
			t.Errorf("ValidToken(%q): %v", s, err)
		}
	}
	for _, c := range badTokens {
		err := protocol.ValidToken("namespace", c.s)
		if err == nil {
			t.Errorf("ValidToken(%q) accepted it (%s)", c.s, c.name)
		} else if !strings.Contains(err.Error(), "namespace") {
			t.Errorf("ValidToken(%q): error %q does not say what", c.s, err)
		}
	}
}

func TestSubjectDoneUsesCanonicalUUID(t *testing.T) {
	id := uuid.MustParse("{0B5C0F4E-7A5D-4C1E-9D33-6F2C1A8E0001}")
	if got := protocol.SubjectDone("ns", id); got != "kagzi.v1.done.ns.0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001" {
		t.Errorf("SubjectDone = %q", got)
	}
}

// TestNamespaceSubjectsCarryTheirNamespace: every subject that belongs to
// a namespace is allowed by the permissions of that namespace's worker or
// client and by no permission of another namespace's.
func TestNamespaceSubjectsCarryTheirNamespace(t *testing.T) {
	perms := func(role, ns, ident string) protocol.Permission {
		p, err := protocol.Permissions(role, ns, ident)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	allowed := func(patterns []string, subject string) bool {
		for _, p := range patterns {
			if matches(p, subject) {
				return true
			}
		}
		return false
	}
	workerPub := func(ns string) []string {
		return []string{protocol.SubjectWork(ns, "q"), protocol.SubjectReport(ns), protocol.SubjectPayload(ns),
			protocol.SubjectWorkerRegister(ns), protocol.SubjectWorkerHeartbeat(ns), protocol.SubjectWorkerDeregister(ns)}
	}
	workerSub := func(ns, ident string) []string {
		return []string{protocol.SubjectCancel(ns, id1), protocol.SubjectRegistration(ns, id1),
			protocol.WorkerInbox(ns, ident) + ".abc", protocol.WorkerInbox(ns, ident) + ".abc.1"}
	}
	a, b := perms(protocol.RoleWorker, "a", "w1"), perms(protocol.RoleWorker, "b", "w1")
	a2 := perms(protocol.RoleWorker, "a", "w2")
	for _, s := range workerPub("a") {
		if !allowed(a.Publish, s) || allowed(b.Publish, s) {
			t.Errorf("publish %s: worker of a allowed %v, of b allowed %v", s, allowed(a.Publish, s), allowed(b.Publish, s))
		}
	}
	for _, s := range workerSub("a", "w1") {
		if !allowed(a.Subscribe, s) || allowed(b.Subscribe, s) {
			t.Errorf("subscribe %s: worker of a allowed %v, of b allowed %v", s, allowed(a.Subscribe, s), allowed(b.Subscribe, s))
		}
	}
	if s := protocol.WorkerInbox("a", "w1") + ".x"; allowed(a2.Subscribe, s) {
		t.Errorf("worker a/w2 may read %s", s)
	}
	ca, cb := perms(protocol.RoleClient, "a", ""), perms(protocol.RoleClient, "b", "")
	if s := protocol.SubjectDone("a", id1); !allowed(ca.Subscribe, s) || allowed(cb.Subscribe, s) {
		t.Errorf("subscribe %s: client of a %v, of b %v", s, allowed(ca.Subscribe, s), allowed(cb.Subscribe, s))
	}
	if _, err := protocol.Permissions("root", "", ""); err == nil {
		t.Error("unknown role accepted")
	}
	if _, err := protocol.Permissions(protocol.RoleWorker, "a.b", "w"); err == nil {
		t.Error("invalid namespace accepted")
	}
}

func TestParseWorker(t *testing.T) {
	kind, ns, err := protocol.ParseWorker(protocol.SubjectWorkerHeartbeat("ns"))
	if err != nil || kind != protocol.WorkerHeartbeatKind || ns != "ns" {
		t.Errorf("ParseWorker: %q %q %v", kind, ns, err)
	}
	for _, bad := range []string{"kagzi.v1.worker.heartbeat", "kagzi.v1.worker.other.ns", "kagzi.v1.worker.register.a.b", "kagzi.v1.ready.a.b"} {
		if _, _, err := protocol.ParseWorker(bad); !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("ParseWorker(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// A subject addressed to one dispatcher names it, and gives back the
// queue-group subject it was made from; anything else is not direct.
func TestSubjectDirect(t *testing.T) {
	id := uuid.New()
	for _, group := range []string{protocol.SubjectWork("ns", "q"), protocol.SubjectReport("ns"), protocol.SubjectPayload("ns")} {
		direct := protocol.SubjectDirect(id, group)
		got, d, ok := protocol.Undirect(direct)
		if !ok || got != group || d != id {
			t.Errorf("Undirect(%q) = %q, %v, %v; want %q, %v, true", direct, got, d, ok, group, id)
		}
		if !subjectMatches(protocol.SubjectDirectTo(id), direct) || !subjectMatches(protocol.SubjectDirectAll, direct) ||
			!subjectMatches(protocol.SubjectDirectAny(group), direct) {
			t.Errorf("%q is not matched by the dispatcher's, the permissions' or the observers' patterns", direct)
		}
	}
	if !subjectMatches(protocol.SubjectDirectWorkAll, protocol.SubjectDirect(id, protocol.SubjectWork("ns", "q"))) {
		t.Error("SubjectDirectWorkAll does not match a direct work request")
	}
	for _, s := range []string{protocol.SubjectReport("ns"), protocol.Prefix + "direct.", protocol.Prefix + "direct.x.report.ns",
		protocol.Prefix + "direct." + id.String(), protocol.Prefix + "direct." + id.String() + "."} {
		if got, _, ok := protocol.Undirect(s); ok || got != s {
			t.Errorf("Undirect(%q) = %q, ok %v; want it unchanged and not direct", s, got, ok)
		}
	}
}

// subjectMatches reports whether NATS subject pattern p matches s.
func subjectMatches(p, s string) bool {
	pt, st := strings.Split(p, "."), strings.Split(s, ".")
	for i, tok := range pt {
		if tok == ">" {
			return len(st) > i
		}
		if i >= len(st) || (tok != "*" && tok != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}
