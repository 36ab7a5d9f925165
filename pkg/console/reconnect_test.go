package console_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// TestReconnectKeepsTheApplicationsHandler: a console embedded on the
// application's connection tells its pages to resync after a reconnect,
// and the reconnect handler the application set still runs.
func TestReconnectKeepsTheApplicationsHandler(t *testing.T) {
	s := testnats.Start(t)
	app := make(chan struct{}, 4)
	nc := s.Connect(t, nats.ReconnectHandler(func(*nats.Conn) { app <- struct{}{} }))
	pool, _ := testdb.Pool(t)
	con, err := console.New(console.Options{Pool: pool, NATS: nc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(con.Handler())
	defer srv.Close()
	if err := con.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer con.Stop()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/stream?ns=default", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- name
			}
		}
	}()
	next := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case name, ok := <-events:
				if !ok {
					t.Fatalf("stream ended waiting for %s", want)
				}
				if name == want {
					return
				}
			case <-deadline:
				t.Fatalf("no %s event within 10 s", want)
			}
		}
	}
	next("counts")
	if err := nc.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	next("resync")
	select {
	case <-app:
	case <-time.After(10 * time.Second):
		t.Fatal("the application's reconnect handler did not run")
	}
}
