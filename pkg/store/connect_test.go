package store_test

import (
	"context"
	"testing"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The pools Connect opens end a session idle inside a transaction (a
// frozen process's) after IdleInTransactionTimeout, and a URL may say
// otherwise.
func TestConnectBoundsIdleTransactions(t *testing.T) {
	t.Parallel()
	_, url := testdb.Pool(t)
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{url, "5s"},
		{url + "&idle_in_transaction_session_timeout=700", "700ms"},
	} {
		pool, err := store.Connect(ctx, c.url)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = pool.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&got)
		pool.Close()
		if err != nil || got != c.want {
			t.Errorf("%s: idle_in_transaction_session_timeout %q (%v), want %q", c.url, got, err, c.want)
		}
	}
}
