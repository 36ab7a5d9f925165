package store

import "github.com/kagzi/kagzi/pkg/store/internal/startbatch"

// Start batches (docs/batching.md) are defined in package startbatch.
type (
	// StartBatch is a batch option: Key, MaxSize, MaxWait.
	StartBatch = startbatch.Spec
	// StartBatchAddParams are one item to add to its open batch.
	StartBatchAddParams = startbatch.AddParams
	// StartBatchAdded is what StartBatchesAdd did.
	StartBatchAdded = startbatch.Added
	// StartBatchItem is an item and what became of it.
	StartBatchItem = startbatch.Item
	// StartBatchInfo is a start batch, open or closed.
	StartBatchInfo = startbatch.Batch
	startPart      = startbatch.StartBatches
)

// ErrStartBatch is a malformed batch option; it is an ErrInvalidArgument.
var ErrStartBatch = startbatch.ErrStartBatch

// Limits of a batch option.
const (
	MaxStartBatchKeyLen = startbatch.MaxKeyLen
	MaxStartBatchSize   = startbatch.MaxSize
	MaxStartBatchWait   = startbatch.MaxWait
)
