// Package tokenstore holds the statements of the HTTP API's bearer tokens
// (migration 032_api_tokens.sql): made with a random secret of which only
// the SHA-256 is stored, looked up by that hash on every request, listed
// and revoked by name. Package store embeds its Tokens in Store, so its
// methods are the Store's.
package tokenstore
