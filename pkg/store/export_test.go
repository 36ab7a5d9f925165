package store

import (
	"context"

	"github.com/kagzi/kagzi/pkg/store/internal/opsstore"
)

// Exec runs sql on s's executor, for tests that look at a session's state.
func (s *Store) Exec(ctx context.Context, sql string) (string, error) {
	var v string
	err := s.h.DB.QueryRow(ctx, sql).Scan(&v)
	return v, err
}

// SetQueryTimeout shortens the timeout of listings and counts by a query,
// for the test of that timeout.
var SetQueryTimeout = opsstore.SetQueryTimeout
