package store

// LockConnConfig exposes lockConnConfig to the store's tests.
var LockConnConfig = lockConnConfig
