// Package e2e holds Kagzi's end-to-end tests: every service assembled as in
// `kagzi dev`, over a real Postgres database of the test's own and a real
// NATS server, driven through the client SDK.
package e2e
