package schedstore

// The names below are defined in package runstore; they are named here
// so that this package's code and its callers use them as their own.

import "github.com/kagzi/kagzi/pkg/store/internal/runstore"

type (
	// RunsCreateParams describe a run to start.
	RunsCreateParams = runstore.RunsCreateParams
)
