package store

import "context"

// Exec runs sql on s's executor, for tests that look at a session's state.
func (s *Store) Exec(ctx context.Context, sql string) (string, error) {
	var v string
	err := s.h.DB.QueryRow(ctx, sql).Scan(&v)
	return v, err
}
