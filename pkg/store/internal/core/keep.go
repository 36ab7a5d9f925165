package core

import "time"

// Bounds of a retention period (0, keep for ever, aside).
const (
	// MinKeep is the shortest period: a client that waits for a run's
	// result reads the run after its end, so a run must outlive that read.
	MinKeep = time.Minute
	// MaxKeep is the longest period short of keeping for ever.
	MaxKeep = 100 * 365 * 24 * time.Hour
)
