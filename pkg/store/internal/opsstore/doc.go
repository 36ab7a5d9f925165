// Package opsstore holds the statements of the fleet and its operators:
// workers, retention, default versions, finished history, progress
// (state and streams), notifications, the console's searches and the
// forks of failed runs. Package store embeds its Ops in Store, so its
// methods are the Store's.
package opsstore
