package reaper

import (
	"context"

	"github.com/kagzi/kagzi/pkg/store"
)

// SetRetentionHook makes r call fn in each retention batch's transaction,
// after the deletion and before the commit, on its leader goroutine. Set
// it before Start.
func SetRetentionHook(r *Reaper, fn func(ctx context.Context, tx *store.Store)) {
	r.retain.onBatch = fn
}
