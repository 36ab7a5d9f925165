// Package webhook verifies signed webhook deliveries (docs/webhooks.md):
// the signature formats of GitHub, Stripe and Kagzi's generic shared-secret
// form, the event name and id a valid delivery is published as, and the
// counters of refused deliveries. It is pure: no I/O, no store; the web
// console's POST /webhooks/{source} reads the source from the store,
// verifies with Verify and publishes.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
)

// Kind is a signature format.
type Kind string

// The formats a source may have.
const (
	// GitHub: X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>;
	// the delivery id is X-GitHub-Delivery, the event type X-GitHub-Event.
	GitHub Kind = "github"
	// Stripe: Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">;
	// the delivery id is the body's "id", the event type its "type".
	Stripe Kind = "stripe"
	// Generic: X-Kagzi-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
	// "t.body">; the delivery id is X-Kagzi-Delivery, the event type
	// X-Kagzi-Event (optional).
	Generic Kind = "generic"
)

// Limits of a source's configuration and of a delivery's headers.
const (
	// MinSecretLen and MaxSecretLen bound a source's secret (bytes).
	MinSecretLen = 16
	MaxSecretLen = 512
	// MaxTemplateLen bounds the event name template.
	MaxTemplateLen = 200
	// MaxDeliveryIDLen bounds a delivery id and an event type.
	MaxDeliveryIDLen = 200
	// DefaultTolerance is how far a Stripe or generic signature's
	// timestamp may be from now; MaxTolerance bounds what a source sets.
	DefaultTolerance = 5 * time.Minute
	MaxTolerance     = time.Hour
	// maxSigHeader bounds a signature header.
	maxSigHeader = 4096
)

// Errors of Verify and of a source's configuration.
var (
	// ErrConfig is a source configuration that is not valid.
	ErrConfig = errors.New("webhook source")
	// ErrSignature is a missing, malformed or wrong signature (401).
	ErrSignature = errors.New("webhook signature is not valid")
	// ErrStale is a signature whose timestamp is outside the tolerance
	// (401): an old delivery replayed, or a clock far off.
	ErrStale = errors.New("webhook timestamp is outside the tolerance")
	// ErrMalformed is a correctly signed delivery without a usable
	// delivery id or event type (400).
	ErrMalformed = errors.New("webhook delivery is malformed")
)

// Source is what verifying a source's deliveries needs.
type Source struct {
	Kind   Kind
	Secret []byte
	// Tolerance bounds the timestamp's distance from now (Stripe,
	// generic); zero is DefaultTolerance.
	Tolerance time.Duration
	// Template is the event name: "{event}" in it is replaced by the
	// delivery's event type.
	Template string
}

// Check checks a source's configuration (ErrConfig).
func (s Source) Check() error {
	switch s.Kind {
	case GitHub, Stripe, Generic:
	default:
		return fmt.Errorf("%w: kind %q is not one of github, stripe, generic", ErrConfig, echo(string(s.Kind)))
	}
	if len(s.Secret) < MinSecretLen || len(s.Secret) > MaxSecretLen {
		return fmt.Errorf("%w: the secret must be %d to %d bytes, is %d", ErrConfig, MinSecretLen, MaxSecretLen, len(s.Secret))
	}
	if s.Tolerance < 0 || s.Tolerance > MaxTolerance {
		return fmt.Errorf("%w: the tolerance must be 0 (default %s) to %s, is %s", ErrConfig, DefaultTolerance, MaxTolerance, s.Tolerance)
	}
	if s.Template == "" || len(s.Template) > MaxTemplateLen {
		return fmt.Errorf("%w: the event name template must be 1 to %d bytes, is %d", ErrConfig, MaxTemplateLen, len(s.Template))
	}
	// The template with a sample type must be a valid event name; the
	// store checks that once more for each delivery's actual name.
	if strings.ContainsAny(strings.ReplaceAll(s.Template, "{event}", "x"), "{} *>") {
		return fmt.Errorf("%w: event name template %q: only {event} may be substituted, and no spaces, * or >", ErrConfig, echo(s.Template))
	}
	return nil
}

// Delivery is a verified delivery.
type Delivery struct {
	// ID is the sender's delivery id: a replay carries the same one.
	ID string
	// Event is the sender's event type ("" when a generic sender gives
	// none).
	Event string
}

// Verify checks a delivery of source s received at now: its signature
// over body (ErrSignature), its timestamp (ErrStale) and its delivery id
// and event type (ErrMalformed). The errors say what was wrong, never the
// expected signature.
func Verify(s Source, h http.Header, body []byte, now time.Time) (Delivery, error) {
	switch s.Kind {
	case GitHub:
		sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
		if !ok || !validMAC(s.Secret, sig, body) {
			return Delivery{}, fmt.Errorf("%w: X-Hub-Signature-256 must be sha256=<hex HMAC-SHA256 of the body>", ErrSignature)
		}
		return delivery(h.Get("X-GitHub-Delivery"), h.Get("X-GitHub-Event"), true)
	case Stripe:
		if err := verifyStamped(s, "Stripe-Signature", h, body, now); err != nil {
			return Delivery{}, err
		}
		var b struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return Delivery{}, fmt.Errorf("%w: the body is not a JSON object with id and type", ErrMalformed)
		}
		return delivery(b.ID, b.Type, true)
	case Generic:
		if err := verifyStamped(s, "X-Kagzi-Signature", h, body, now); err != nil {
			return Delivery{}, err
		}
		return delivery(h.Get("X-Kagzi-Delivery"), h.Get("X-Kagzi-Event"), false)
	}
	return Delivery{}, fmt.Errorf("%w: kind %q", ErrConfig, echo(string(s.Kind)))
}

// verifyStamped checks a "t=<unix>,v1=<hex>" header: the HMAC of
// "t.body" and t within the tolerance. Any v1 that matches is enough
// (senders list several while they roll their secret).
func verifyStamped(s Source, name string, h http.Header, body []byte, now time.Time) error {
	v := h.Get(name)
	if v == "" || len(v) > maxSigHeader {
		return fmt.Errorf("%w: %s must be t=<unix seconds>,v1=<hex HMAC-SHA256 of \"t.body\">", ErrSignature, name)
	}
	var ts string
	var sigs []string
	for _, part := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = val
		case "v1":
			sigs = append(sigs, val)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: %s must be t=<unix seconds>,v1=<hex HMAC-SHA256 of \"t.body\">", ErrSignature, name)
	}
	signed := make([]byte, 0, len(ts)+1+len(body))
	signed = append(append(append(signed, ts...), '.'), body...)
	ok := false
	for _, sig := range sigs {
		ok = ok || validMAC(s.Secret, sig, signed)
	}
	if !ok {
		return fmt.Errorf("%w: no v1 of %s is the HMAC-SHA256 of \"t.body\"", ErrSignature, name)
	}
	tol := s.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tol || d < -tol {
		return fmt.Errorf("%w: signed at %s, %s from now, more than %s", ErrStale, time.Unix(sec, 0).UTC().Format(time.RFC3339),
			d.Round(time.Second), tol)
	}
	return nil
}

// validMAC reports whether hexSig is the HMAC-SHA256 of msg under secret,
// in constant time.
func validMAC(secret []byte, hexSig string, msg []byte) bool {
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return hmac.Equal(got, m.Sum(nil))
}

// Sign returns the generic form's X-Kagzi-Signature of body at t (tests
// and Go senders use it; docs/webhooks.md shows it with openssl).
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// delivery checks a delivery's id and event type.
func delivery(id, event string, needEvent bool) (Delivery, error) {
	if id == "" || len(id) > MaxDeliveryIDLen || !printable(id) {
		return Delivery{}, fmt.Errorf("%w: the delivery id must be 1 to %d printable bytes", ErrMalformed, MaxDeliveryIDLen)
	}
	if (needEvent && event == "") || len(event) > MaxDeliveryIDLen || !printable(event) {
		return Delivery{}, fmt.Errorf("%w: the event type must be 1 to %d printable bytes", ErrMalformed, MaxDeliveryIDLen)
	}
	return Delivery{ID: id, Event: event}, nil
}

func printable(s string) bool {
	for _, r := range s {
		if r <= ' ' || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// EventName is the name a delivery is published as: the template with
// {event} replaced by its event type. The store checks the result is a
// valid event name.
func EventName(template string, d Delivery) string {
	return strings.ReplaceAll(template, "{event}", d.Event)
}

// idSpace is the UUID namespace of webhook event ids.
var idSpace = uuid.MustParse("5c2d1f0e-6b1a-4c52-9a36-0c6b3e1d7a40")

// EventID is the id a delivery is published with: a UUIDv5 of (namespace,
// source, delivery id), so a replayed delivery names the event published
// already and cannot publish twice.
func EventID(namespace, source, deliveryID string) uuid.UUID {
	return uuid.NewSHA1(idSpace, []byte(namespace+"\x00"+source+"\x00"+deliveryID))
}

// echo shortens what a user typed for an error message.
func echo(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
