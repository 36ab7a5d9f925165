package store_test

import (
	"testing"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// BenchmarkRunsCreate starts one run per operation, without search
// attributes (the common start, whose statement carries empty attribute
// arrays) and with three values of two attributes (inserted in the same
// statement, after one read of the declared kinds).
//
//	go test -run XXX -bench BenchmarkRunsCreate -benchtime 3000x ./pkg/store/
func BenchmarkRunsCreate(b *testing.B) {
	pool, _ := testdb.Pool(b)
	s := store.New(pool, store.Options{})
	ctx := b.Context()
	if err := s.AttributesDeclare(ctx, "ns", "customer", store.AttributeKeyword); err != nil {
		b.Fatal(err)
	}
	if err := s.AttributesDeclare(ctx, "ns", "amount", store.AttributeInt); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		attrs map[string]any
	}{{"none", nil}, {"three", map[string]any{"customer": "42", "amount": 7, "tags": []string{"a"}}}} {
		if c.attrs != nil {
			delete(c.attrs, "tags")
			c.attrs["customer"] = []string{"42", "43"}
		}
		b.Run(c.name, func(b *testing.B) {
			// In one transaction, so the commit's fsync does not hide what
			// the statement costs.
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			s := s.WithTx(tx)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Input: []byte(`{}`), Attributes: c.attrs}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
