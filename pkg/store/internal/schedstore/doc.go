// Package schedstore holds the statements of schedules: their cron and
// time zone, their fires (with catch-up, jitter and overlap policies) and
// backfills. A fire starts runs through the runs' own statements
// (package runstore). Package store embeds its Schedules in Store, so its
// methods are the Store's.
package schedstore
