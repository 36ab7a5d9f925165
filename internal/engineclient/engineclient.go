// Package engineclient builds a pkg/client Client over the engine's own
// store, for the engine's tools, console and tests, which already hold a
// *store.Store. Applications build clients from a pool or a URL
// (client.NewFromPool, client.Connect); the data layer is not part of the
// surface they program against, so this constructor is internal.
package engineclient

import (
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/sdkhook"
	"github.com/kagzi/kagzi/internal/store"
	"github.com/kagzi/kagzi/pkg/client"
)

// New returns a client over st and nc (nc nil: no live notifications).
func New(st *store.Store, nc *nats.Conn, opts client.Options) (*client.Client, error) {
	return sdkhook.NewClient.(func(*store.Store, *nats.Conn, client.Options) (*client.Client, error))(st, nc, opts)
}
