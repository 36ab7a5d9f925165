package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/webhook"
)

var secret = []byte("0123456789abcdef-secret")

func mac(msg string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestVerifyFormats(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ts := fmt.Sprint(now.Unix())
	old := fmt.Sprint(now.Add(-6 * time.Minute).Unix())
	gh := webhook.Source{Kind: webhook.GitHub, Secret: secret, Template: "github.{event}"}
	st := webhook.Source{Kind: webhook.Stripe, Secret: secret, Template: "stripe.{event}"}
	gen := webhook.Source{Kind: webhook.Generic, Secret: secret, Template: "shop.order"}
	body := `{"id":"evt_1","type":"charge.succeeded"}`
	for _, c := range []struct {
		name string
		src  webhook.Source
		h    http.Header
		want error
		id   string
	}{
		{"github valid", gh, hdr("X-Hub-Signature-256", "sha256="+mac(body), "X-GitHub-Delivery", "d1", "X-GitHub-Event", "push"), nil, "d1"},
		{"github bad signature", gh, hdr("X-Hub-Signature-256", "sha256="+mac(body+" "), "X-GitHub-Delivery", "d1", "X-GitHub-Event", "push"), webhook.ErrSignature, ""},
		{"github no prefix", gh, hdr("X-Hub-Signature-256", mac(body), "X-GitHub-Delivery", "d1", "X-GitHub-Event", "push"), webhook.ErrSignature, ""},
		{"github not hex", gh, hdr("X-Hub-Signature-256", "sha256=zz", "X-GitHub-Delivery", "d1", "X-GitHub-Event", "push"), webhook.ErrSignature, ""},
		{"github no delivery", gh, hdr("X-Hub-Signature-256", "sha256="+mac(body), "X-GitHub-Event", "push"), webhook.ErrMalformed, ""},
		{"github no event", gh, hdr("X-Hub-Signature-256", "sha256="+mac(body), "X-GitHub-Delivery", "d1"), webhook.ErrMalformed, ""},
		{"stripe valid", st, hdr("Stripe-Signature", "t="+ts+",v1="+mac(ts+"."+body)), nil, "evt_1"},
		{"stripe second v1", st, hdr("Stripe-Signature", "t="+ts+",v1="+mac("x")+",v1="+mac(ts+"."+body)), nil, "evt_1"},
		{"stripe bad signature", st, hdr("Stripe-Signature", "t="+ts+",v1="+mac(ts+".{}")), webhook.ErrSignature, ""},
		{"stripe stale", st, hdr("Stripe-Signature", "t="+old+",v1="+mac(old+"."+body)), webhook.ErrStale, ""},
		{"stripe no t", st, hdr("Stripe-Signature", "v1="+mac(ts+"."+body)), webhook.ErrSignature, ""},
		{"stripe missing", st, hdr(), webhook.ErrSignature, ""},
		{"generic valid", gen, hdr("X-Kagzi-Signature", webhook.Sign(secret, []byte(body), now), "X-Kagzi-Delivery", "g1"), nil, "g1"},
		{"generic stale future", gen, hdr("X-Kagzi-Signature", webhook.Sign(secret, []byte(body), now.Add(10*time.Minute)), "X-Kagzi-Delivery", "g1"), webhook.ErrStale, ""},
		{"generic wrong secret", gen, hdr("X-Kagzi-Signature", webhook.Sign([]byte("another-secret-0123"), []byte(body), now), "X-Kagzi-Delivery", "g1"), webhook.ErrSignature, ""},
		{"generic no delivery", gen, hdr("X-Kagzi-Signature", webhook.Sign(secret, []byte(body), now)), webhook.ErrMalformed, ""},
		{"generic garbage header", gen, hdr("X-Kagzi-Signature", "t=abc,v1=", "X-Kagzi-Delivery", "g1"), webhook.ErrSignature, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := webhook.Verify(c.src, c.h, []byte(body), now)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if d.ID != c.id {
				t.Fatalf("delivery %q, want %q", d.ID, c.id)
			}
		})
	}
	// Stripe's event type comes from the body.
	d, err := webhook.Verify(st, hdr("Stripe-Signature", "t="+ts+",v1="+mac(ts+"."+body)), []byte(body), now)
	if err != nil || webhook.EventName(st.Template, d) != "stripe.charge.succeeded" {
		t.Fatalf("stripe event name %q %v", webhook.EventName(st.Template, d), err)
	}
}

func TestSourceCheckAndEventID(t *testing.T) {
	ok := webhook.Source{Kind: webhook.GitHub, Secret: secret, Template: "github.{event}"}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []webhook.Source{
		{Kind: "gitlab", Secret: secret, Template: "x"},
		{Kind: webhook.GitHub, Secret: []byte("short"), Template: "x"},
		{Kind: webhook.GitHub, Secret: make([]byte, webhook.MaxSecretLen+1), Template: "x"},
		{Kind: webhook.Stripe, Secret: secret, Template: "x", Tolerance: 2 * time.Hour},
		{Kind: webhook.Stripe, Secret: secret, Template: "x.{type}"},
		{Kind: webhook.Stripe, Secret: secret, Template: ""},
	} {
		if err := bad.Check(); !errors.Is(err, webhook.ErrConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	a, b := webhook.EventID("default", "gh", "d1"), webhook.EventID("default", "gh", "d1")
	if a != b || a == webhook.EventID("default", "gh", "d2") || a == webhook.EventID("other", "gh", "d1") {
		t.Fatal("event ids are not derived from (namespace, source, delivery)")
	}
	var c webhook.Counters
	c.Count(webhook.Replayed)
	c.Count(webhook.Accepted)
	if s := c.Stats(); s.Replayed != 1 || s.Accepted != 1 || s.BadSignature != 0 {
		t.Fatalf("%+v", s)
	}
}
