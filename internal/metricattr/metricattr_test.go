package metricattr

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

func TestCacheBuildsEachSetOnce(t *testing.T) {
	var c Cache[[2]string]
	builds := 0
	attrs := func(k [2]string) []attribute.KeyValue {
		builds++
		return []attribute.KeyValue{attribute.String("a", k[0]), attribute.String("b", k[1])}
	}
	for range 3 {
		c.Get([2]string{"x", "y"}, attrs)
	}
	o := c.Get([2]string{"x", "z"}, attrs)
	if builds != 2 {
		t.Fatalf("built %d sets for 2 keys", builds)
	}
	set := metric.NewAddConfig([]metric.AddOption{o}).Attributes()
	if v, ok := set.Value("b"); !ok || v.AsString() != "z" {
		t.Fatalf("set of (x, z) has b = %v, %v", v, ok)
	}
}

func TestCacheStopsKeepingPastItsBound(t *testing.T) {
	var c Cache[int]
	for i := range maxSets + 10 {
		c.Get(i, func(k int) []attribute.KeyValue { return []attribute.KeyValue{attribute.Int("k", k)} })
	}
	if n := c.n.Load(); n != maxSets {
		t.Fatalf("kept %d sets, bound %d", n, maxSets)
	}
	o := c.Get(maxSets+5, func(k int) []attribute.KeyValue { return []attribute.KeyValue{attribute.Int("k", k)} })
	set := metric.NewAddConfig([]metric.AddOption{o}).Attributes()
	if v, _ := set.Value("k"); v.AsInt64() != maxSets+5 {
		t.Fatalf("uncached set has k = %v", v)
	}
}
