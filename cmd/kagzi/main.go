// Command kagzi is the operator CLI of Kagzi: it applies migrations,
// starts, lists, shows, cancels and retries runs, sends events, manages
// cron schedules and lists workers. Run `kagzi --help` for the commands.
//
// Exit codes: 0 on success, 1 when the operation failed (not found,
// conflict, a run that failed or was cancelled while waiting), 2 on bad
// usage (unknown command or flag, bad argument, invalid JSON or UUID).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
