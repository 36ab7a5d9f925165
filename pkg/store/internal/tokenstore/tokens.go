package tokenstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
)

// The bounds of a token.
const (
	// MaxAPITokens bounds the live (not revoked) tokens of one namespace.
	MaxAPITokens = 1000
	// MaxAPITokenName bounds a token's name, in bytes.
	MaxAPITokenName = 64
	// DefaultAPITokenRate is a token's request rate (per second, per
	// serving process) when none is given; MaxAPITokenRate is the most.
	DefaultAPITokenRate = 100
	MaxAPITokenRate     = 10000
	// MaxAPITokenTTL bounds a token's lifetime when it has one.
	MaxAPITokenTTL = 5 * 365 * 24 * time.Hour
	// APITokenPrefix starts every secret, so a leaked one is recognisable
	// (secret scanners) and a mistyped credential is told apart.
	APITokenPrefix = "kzt_"
)

// The scopes a token may grant: each names the requests it allows.
const (
	ScopeRunsStart     = "runs:start"
	ScopeRunsRead      = "runs:read"
	ScopeRunsCancel    = "runs:cancel"
	ScopeEventsSend    = "events:send"
	ScopeEventsPublish = "events:publish"
)

// APIScopes are every scope, in the order they are documented.
var APIScopes = []string{ScopeRunsStart, ScopeRunsRead, ScopeRunsCancel, ScopeEventsSend, ScopeEventsPublish}

// APIToken is a bearer token of the HTTP API, never with its secret.
type APIToken struct {
	ID        uuid.UUID
	Namespace string
	Name      string
	Scopes    []string
	// Rate is the requests per second the token may make of one serving
	// process.
	Rate      int
	CreatedAt time.Time
	ExpiresAt *time.Time
	RevokedAt *time.Time
	// Expired is whether ExpiresAt had passed when the token was read.
	Expired bool
}

// Allows reports whether the token grants scope.
func (t *APIToken) Allows(scope string) bool { return slices.Contains(t.Scopes, scope) }

// APITokenParams describe a token to make.
type APITokenParams struct {
	Namespace, Name string
	Scopes          []string
	// Rate is 0 for DefaultAPITokenRate, at most MaxAPITokenRate.
	Rate int
	// TTL is 0 for a token that does not expire, at most MaxAPITokenTTL.
	TTL time.Duration
}

// Tokens holds the statements of API tokens over one executor.
type Tokens struct{ h core.Handle }

// New returns the tokens' statements over h.
func New(h core.Handle) Tokens { return Tokens{h: h} }

//go:embed sql/*.sql
var sqlFS embed.FS

var sqlBlocks = core.MustLoadSQL(sqlFS)

func stmt(name string) *core.NamedSQL { return sqlBlocks.Stmt(name) }

var (
	apiTokensCreateSQL      = stmt("APITokensCreate")
	apiTokensListSQL        = stmt("APITokensList")
	apiTokensGetBySecretSQL = stmt("APITokensGetBySecret")
	apiTokensRevokeSQL      = stmt("APITokensRevoke")
)

// HashAPISecret is what is stored of a secret, and looked up.
func HashAPISecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

func (p *APITokenParams) check() error {
	if err := protocol.ValidToken("namespace", p.Namespace); err != nil {
		return core.Invalidf("%v", err)
	}
	if err := protocol.ValidToken("token name", p.Name); err != nil {
		return core.Invalidf("%v", err)
	}
	if len(p.Name) > MaxAPITokenName {
		return core.Invalidf("token name is %d bytes, at most %d", len(p.Name), MaxAPITokenName)
	}
	if len(p.Scopes) == 0 {
		return core.Invalidf("a token needs at least one scope (%s)", strings.Join(APIScopes, ", "))
	}
	seen := map[string]bool{}
	for _, s := range p.Scopes {
		if !slices.Contains(APIScopes, s) {
			return core.Invalidf("unknown scope %q: one of %s", protocol.Echo(s), strings.Join(APIScopes, ", "))
		}
		if seen[s] {
			return core.Invalidf("scope %q given twice", s)
		}
		seen[s] = true
	}
	switch {
	case p.Rate == 0:
		p.Rate = DefaultAPITokenRate
	case p.Rate < 0 || p.Rate > MaxAPITokenRate:
		return core.Invalidf("rate %d: from 1 to %d requests per second", p.Rate, MaxAPITokenRate)
	}
	if p.TTL < 0 || p.TTL > MaxAPITokenTTL {
		return core.Invalidf("expiry %s: from 1s to %s, or none", p.TTL, MaxAPITokenTTL)
	}
	if p.TTL > 0 && p.TTL < time.Second {
		return core.Invalidf("expiry %s: at least 1s", p.TTL)
	}
	return nil
}

// APITokensCreate makes a token and returns it with its secret, which
// is not stored (only its SHA-256) and cannot be read again. Bad input, or
// a namespace at MaxAPITokens live tokens, is ErrInvalidArgument; a live
// token of the name, ErrConflict.
func (t *Tokens) APITokensCreate(ctx context.Context, p APITokenParams) (APIToken, string, error) {
	if err := p.check(); err != nil {
		return APIToken{}, "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return APIToken{}, "", fmt.Errorf("token secret: %w", err)
	}
	secret := APITokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	id, err := uuid.NewV7()
	if err != nil {
		return APIToken{}, "", fmt.Errorf("token id: %w", err)
	}
	tok := APIToken{ID: id, Namespace: p.Namespace, Name: p.Name, Scopes: p.Scopes, Rate: p.Rate}
	err = apiTokensCreateSQL.QueryRow(ctx, t.h.DB, pgx.NamedArgs{"token_id": id, "namespace": p.Namespace, "name": p.Name,
		"secret_hash": HashAPISecret(secret), "scopes": p.Scopes, "rate": p.Rate, "ttl_s": int64(p.TTL / time.Second),
		"max_tokens": MaxAPITokens}).Scan(&tok.CreatedAt, &tok.ExpiresAt)
	if core.IsNoRows(err) {
		if _, gerr := t.liveByName(ctx, p.Namespace, p.Name); gerr == nil {
			return APIToken{}, "", fmt.Errorf("%w: token %q exists in namespace %q", core.ErrConflict, p.Name, p.Namespace)
		}
		return APIToken{}, "", core.Invalidf("namespace %q has %d tokens, the most it may have: revoke one", p.Namespace, MaxAPITokens)
	}
	if err != nil {
		return APIToken{}, "", core.MapErr("create api token", err)
	}
	return tok, secret, nil
}

func (t *Tokens) liveByName(ctx context.Context, ns, name string) (APIToken, error) {
	ts, err := t.APITokensList(ctx, ns)
	if err != nil {
		return APIToken{}, err
	}
	for _, tok := range ts {
		if tok.Name == name {
			return tok, nil
		}
	}
	return APIToken{}, fmt.Errorf("api token %q: %w", name, core.ErrNotFound)
}

func scanToken(row pgx.Row, extra ...any) (APIToken, error) {
	var tok APIToken
	err := row.Scan(append([]any{&tok.ID, &tok.Namespace, &tok.Name, &tok.Scopes, &tok.Rate, &tok.CreatedAt, &tok.ExpiresAt, &tok.RevokedAt}, extra...)...)
	return tok, err
}

// APITokensList returns the namespace's live tokens, oldest first.
func (t *Tokens) APITokensList(ctx context.Context, ns string) ([]APIToken, error) {
	rows, err := apiTokensListSQL.Query(ctx, t.h.DB, pgx.NamedArgs{"namespace": ns, "max_tokens": MaxAPITokens})
	if err != nil {
		return nil, core.MapErr("list api tokens", err)
	}
	defer rows.Close()
	out := []APIToken{}
	for rows.Next() {
		tok, err := scanToken(rows)
		if err != nil {
			return nil, core.MapErr("list api tokens", err)
		}
		out = append(out, tok)
	}
	return out, core.MapErr("list api tokens", rows.Err())
}

// APITokensGetBySecret returns the token whose secret is secret, revoked
// or expired as it may be (the caller says which); ErrNotFound if none.
func (t *Tokens) APITokensGetBySecret(ctx context.Context, secret string) (APIToken, error) {
	var expired bool
	tok, err := scanToken(apiTokensGetBySecretSQL.QueryRow(ctx, t.h.DB, pgx.NamedArgs{"secret_hash": HashAPISecret(secret)}), &expired)
	tok.Expired = expired
	return tok, core.MapErr("api token", err)
}

// APITokensRevoke revokes the namespace's live token name: requests with
// it are refused from then on. ErrNotFound if there is none.
func (t *Tokens) APITokensRevoke(ctx context.Context, ns, name string) (APIToken, error) {
	tok, err := scanToken(apiTokensRevokeSQL.QueryRow(ctx, t.h.DB, pgx.NamedArgs{"namespace": ns, "name": name}))
	if core.IsNoRows(err) {
		return APIToken{}, fmt.Errorf("api token %q of namespace %q: %w", protocol.Echo(name), ns, core.ErrNotFound)
	}
	return tok, core.MapErr("revoke api token", err)
}
