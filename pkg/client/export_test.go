package client

import "github.com/google/uuid"

// SetAfterSubscribe installs the test hook of Wait.
func SetAfterSubscribe(f func(uuid.UUID)) { afterSubscribe = f }
