// Package startbatch holds the statements of start batches
// (docs/batching.md): starts and trigger events with a batch option become
// items of the open batch of their (namespace, workflow type, queue, key),
// and each batch becomes one run, whose input is the JSON list of its
// items, when it is full or due. A batch's run is created through the
// runs' own statements (package runstore). Package store embeds its
// StartBatches in Store, so its methods are the Store's.
package startbatch
