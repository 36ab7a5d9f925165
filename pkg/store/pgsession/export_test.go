package pgsession

// LockConnConfig exposes lockConnConfig to the package's tests.
var LockConnConfig = lockConnConfig
