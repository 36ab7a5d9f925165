package reaper

// SetFlushHook makes r call fn on its leader goroutine after every flush,
// with the number of workers the flush wrote. Set it before Start.
func SetFlushHook(r *Reaper, fn func(workers int)) { r.onFlush = fn }
