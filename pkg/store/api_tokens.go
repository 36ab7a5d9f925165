package store

import "github.com/kagzi/kagzi/pkg/store/internal/tokenstore"

// API tokens: the bearer tokens of the HTTP API (package httpapi), whose
// statements are package tokenstore's.

type (
	// APIToken is a bearer token of the HTTP API, never with its secret.
	APIToken = tokenstore.APIToken
	// APITokenParams describe a token to make (APITokensCreate).
	APITokenParams = tokenstore.APITokenParams
)

// The bounds and scopes of API tokens.
const (
	MaxAPITokens        = tokenstore.MaxAPITokens
	MaxAPITokenName     = tokenstore.MaxAPITokenName
	DefaultAPITokenRate = tokenstore.DefaultAPITokenRate
	MaxAPITokenRate     = tokenstore.MaxAPITokenRate
	MaxAPITokenTTL      = tokenstore.MaxAPITokenTTL
	ScopeRunsStart      = tokenstore.ScopeRunsStart
	ScopeRunsRead       = tokenstore.ScopeRunsRead
	ScopeRunsCancel     = tokenstore.ScopeRunsCancel
	ScopeEventsSend     = tokenstore.ScopeEventsSend
	ScopeEventsPublish  = tokenstore.ScopeEventsPublish
)

// APIScopes are every scope a token may grant.
var APIScopes = tokenstore.APIScopes
