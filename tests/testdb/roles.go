package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/pkg/store/migrate"
)

// RoleDB is a database set up for least privilege as `kagzi migrate
// --roles` does it: migrated by its owner role, used by a runtime role.
type RoleDB struct {
	Roles dbadmin.Roles
	// AdminURL, OwnerURL, RuntimeURL and SQLURL reach the database as
	// the server's administrator, the owner role, the runtime role and
	// the SQL role.
	AdminURL, OwnerURL, RuntimeURL, SQLURL string
}

// NewRoles creates an empty database and three roles of t's own (roles are
// cluster-wide; the names are random), sets them up, and drops all three
// when t ends. The roles are set up twice at once, as replicas of a
// migrate job would.
func NewRoles(t testing.TB) *RoleDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := AdminURL()
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	r := dbadmin.Roles{Owner: "kagzi_owner_" + suffix, Runtime: "kagzi_runtime_" + suffix, SQL: "kagzi_sql_" + suffix}
	name := "kagzi_r_" + suffix
	// Cleanups run last first: the database goes before its roles.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dbadmin.RolesDrop(ctx, admin, r.Owner, r.Runtime, r.SQL); err != nil {
			t.Logf("drop roles: %v", err)
		}
	})
	dbURL := createDB(t, ctx, admin, name)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = dbadmin.RolesEnsure(ctx, dbURL, r)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("roles: %v", err)
		}
	}
	if _, err := migrate.UpAs(ctx, dbURL, r.Owner); err != nil {
		t.Fatal(err)
	}
	if err := dbadmin.RolesGrantRuntime(ctx, dbURL, r.Owner, r.Runtime); err != nil {
		t.Fatal(err)
	}
	if err := dbadmin.RolesGrantSQL(ctx, dbURL, r.SQL); err != nil {
		t.Fatal(err)
	}
	return &RoleDB{Roles: r, AdminURL: dbURL, OwnerURL: withUser(t, dbURL, r.Owner), RuntimeURL: withUser(t, dbURL, r.Runtime),
		SQLURL: withUser(t, dbURL, r.SQL)}
}

func withUser(t testing.TB, dbURL, user string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("database url: %v", err)
	}
	u.User = url.User(user)
	return u.String()
}
