// Package metricattr keeps the attribute sets of metric measurements made
// on the hot path (every run, every step, every report). Building a set
// sorts, deduplicates and hashes its attributes and allocates; a
// measurement with a prebuilt set costs a fraction of that. The keys are a
// deployment's namespaces, queues, workflow types and outcomes, so the sets
// are few; past a bound the sets are built afresh, never evicted.
package metricattr

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// maxSets bounds how many sets a Cache keeps.
const maxSets = 4096

// Cache maps a key to the measurement option of its attribute set. The zero
// Cache is ready to use and safe for concurrent use.
type Cache[K comparable] struct {
	m sync.Map // K → metric.MeasurementOption
	n atomic.Int64
}

// Get returns the option for k, building it with attrs(k) the first time.
func (c *Cache[K]) Get(k K, attrs func(K) []attribute.KeyValue) metric.MeasurementOption {
	if o, ok := c.m.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributeSet(attribute.NewSet(attrs(k)...))
	if c.n.Load() < maxSets {
		if _, loaded := c.m.LoadOrStore(k, o); !loaded {
			c.n.Add(1)
		}
	}
	return o
}
