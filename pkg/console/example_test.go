package console_test

import (
	"context"
	"log"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/console"
)

// An application mounts a read-only console under /kagzi of its own
// server, on the pool and NATS connection it already has.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://kagzi@localhost:5432/kagzi")
	if err != nil {
		log.Fatal(err)
	}
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	con, err := console.New(console.Options{Pool: pool, NATS: nc, Prefix: "/kagzi", ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := con.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer con.Stop()
	mux := http.NewServeMux()
	mux.Handle("/kagzi/", http.StripPrefix("/kagzi", con.Handler()))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
