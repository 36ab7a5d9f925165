package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The namespace's retention: the default until it sets its own, a type's
// periods over the namespace's, a period not given inherited, and removal
// going back to what is inherited.
func TestRetention(t *testing.T) {
	pool, _ := testdb.Pool(t)
	cl, err := client.NewFromStore(store.New(pool, store.Options{}), nil, client.Options{Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	def := client.RetentionPeriods{Completed: store.DefaultKeepCompleted, Failed: store.DefaultKeepFailed}
	r, err := cl.Retention(ctx)
	if err != nil || r.Periods != def || r.Default != def || len(r.Types) != 0 {
		t.Fatalf("fresh namespace: %+v %v; want the defaults", r, err)
	}
	d := func(x time.Duration) *time.Duration { return &x }
	r, err = cl.SetRetention(ctx, client.RetentionOptions{Completed: d(3 * 24 * time.Hour)})
	if err != nil || r.Periods != (client.RetentionPeriods{Completed: 3 * 24 * time.Hour, Failed: store.DefaultKeepFailed}) {
		t.Fatalf("namespace's completed period: %+v %v", r, err)
	}
	r, err = cl.SetRetention(ctx, client.RetentionOptions{Type: "Report", Failed: d(0)})
	if err != nil || len(r.Types) != 1 || r.Types[0] != (client.TypeRetention{Type: "Report",
		Periods: client.RetentionPeriods{Completed: 3 * 24 * time.Hour, Failed: 0}}) {
		t.Fatalf("Report keeps failed runs for ever: %+v %v", r, err)
	}
	if _, err := cl.SetRetention(ctx, client.RetentionOptions{Completed: d(time.Second)}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a second: %v, want ErrInvalidArgument", err)
	}
	if err := cl.RemoveRetention(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveRetention(ctx, ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	r, err = cl.Retention(ctx)
	if err != nil || r.Periods != def || r.Types[0].Periods != (client.RetentionPeriods{Completed: store.DefaultKeepCompleted}) {
		t.Fatalf("namespace's own removed: %+v %v", r, err)
	}
}
