// Package runstore holds the statements of runs: their start (with
// debounce, id reuse and flow keys), claims, leases, reports, recovery,
// children and continue-as-new, and the steps they record. Package store
// embeds its Runs in Store, so its methods are the Store's.
package runstore
