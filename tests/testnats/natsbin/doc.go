// Package natsbin is the module that pins the nats-server the tests run:
// tests/testnats builds github.com/nats-io/nats-server/v2 at the
// version this module requires (its tool directive) and runs it as a
// process. The module stands apart so that the root module, which
// applications depend on, does not require the server. It holds no code.
package natsbin
