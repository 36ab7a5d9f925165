package runstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// BenchmarkClaimRewrite measures what named parameters cost the hot path,
// on the claim (the longest statement, run once per batch claimed) and on
// a short statement: pgx's rewrite of a statement with pgx.NamedArgs,
// which it does on every call, against the rewrite prepareNamed did once.
//
//	go test -run '^$' -bench BenchmarkClaimRewrite -benchmem ./pkg/store/
func BenchmarkClaimRewrite(b *testing.B) {
	args, err := claimArgs(RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []TypeVersion{{Type: "ProcessOrder", Version: "v1"}, {Type: "Refund"}}, Limit: 64, Lease: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	short := pgx.NamedArgs{"namespace": "default", "run_id": uuid.New()}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		text string
		args pgx.NamedArgs
	}{{"claim", runsClaimSQL.Text(), args}, {"short", leaseCheckSQL.Text(), short}} {
		q := prepareNamed(c.text)
		b.Run(c.name+"/pgx", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.args.RewriteQuery(ctx, nil, c.text, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/prepared", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := q.Bind(c.args).RewriteQuery(ctx, nil, c.text, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPrepareNamed checks a prepared statement gives pgx what pgx's own
// rewrite of pgx.NamedArgs would, for the claims with their arguments.
func TestPrepareNamed(t *testing.T) {
	args, err := claimArgs(RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		q    *namedSQL
		args pgx.NamedArgs
	}{{runsClaimSQL, args}, {runsClaimLimitedSQL, claimLimitedArgs(args, []string{"T"})}, {limitedTypesSQL, limitedTypesArgs(args)},
		{runsClaimFlowPickSQL, runsClaimFlowPickSQL.Only(args)}, {runsClaimFlowSQL, runsClaimFlowSQL.Only(args)}} {
		wantSQL, wantArgs, err := pgx.StrictNamedArgs(c.args).RewriteQuery(ctx, nil, c.q.Text(), nil)
		if err != nil {
			t.Fatalf("%v\n%s", err, c.q.Text())
		}
		gotSQL, gotArgs, err := c.q.Bind(c.args).RewriteQuery(ctx, nil, c.q.Text(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if gotSQL != wantSQL || !reflect.DeepEqual(gotArgs, wantArgs) {
			t.Fatalf("prepared as\n%s\n%v\npgx rewrites it as\n%s\n%v", gotSQL, gotArgs, wantSQL, wantArgs)
		}
		if _, _, err := c.q.Bind(c.args).RewriteQuery(ctx, nil, leaseCheckSQL.Text(), nil); err == nil {
			t.Fatal("arguments bound to one statement were taken for another")
		}
	}
	if _, ok := args["limited_types"]; ok {
		t.Fatal("the limited claim's arguments changed the plain claim's")
	}
}
