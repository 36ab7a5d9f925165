// Package ops owns the kagzi CLI's operating commands: cron schedules
// (schedule), concurrency limits (limit), rate limits (rate-limit),
// retention (retention), workers (worker), workflow default versions
// (workflow), wait tokens (token), event triggers (trigger, and
// event publish), webhook sources (webhook) and HTTP API tokens
// (apitoken). Each New*Cmd builds one top-level
// command over the execution's *cliutil.App; package main registers them.
package ops
