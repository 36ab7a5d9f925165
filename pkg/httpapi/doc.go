// Package httpapi is Kagzi's HTTP API for machine clients (docs/http-api.md,
// "Machine API"): start a run, read it, wait for its result, send it an
// event, publish an event, cancel a run and list runs by a query, in JSON
// under /v1/. The web console mounts it beside its browser API (package
// console), outside the console's login and CSRF guard: a bearer token
// (`kagzi apitoken create`) is the credential. A token belongs to one
// namespace, grants a set of scopes and has a request rate, enforced by a
// token bucket in the serving process.
//
// One route table (routes.go) is the single source of the mux, of the
// scope each route needs and of the OpenAPI 3 document served at
// GET /v1/openapi.json, whose schemas are made from the request and
// response Go types by reflection (openapi.go). Every action calls
// pkg/client, as the console does, so validation and errors are the Go
// client's.
package httpapi
