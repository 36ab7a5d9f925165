// Package pgsession owns the connections that must be sessions of their
// own on Postgres, straight to it and never through a pooler: a leader's
// advisory lock (Leader), the relay's LISTEN (LockedConnect), and the
// dead-peer detection both ends of such a connection need (TCP keepalives
// and TCP_USER_TIMEOUT, see lockconn.go) so that a leader cut off from the
// network loses its lock within seconds. Check tells a session URL that
// reaches a pooler at once.
//
// Its statements are the store's (store.SessionLock, store.LeadersElect,
// store.Store.Fenced): this package holds connections, not SQL.
package pgsession
