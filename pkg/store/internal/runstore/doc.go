// Package runstore holds the statements of runs: their start (with
// debounce, id reuse and flow keys), claims, leases, reports, recovery,
// children and continue-as-new, and the steps they record. Package store
// embeds its Runs in Store, so its methods are the Store's.
//
// A claim reads along one file, runs_claim.go (its arguments, the batch
// of the plain claim and the limits' read, the route to another claim
// statement, the scan), and enters runs_keys.go once, for the claim of
// runs under per-key or rate limits (runsClaimFlow), whose rows it scans
// back in runs_claim.go.
package runstore
