package tracectx

import "testing"

// A traceparent NewBirth mints is known for the store's by BirthRoot, and
// one of a real span (a random span id) is not.
func TestBirthRoot(t *testing.T) {
	for range 100 {
		tc, err := NewBirth()
		if err != nil {
			t.Fatal(err)
		}
		tid, sid, ok := BirthRoot(tc)
		if !ok || sid != birthSpanID(tid) {
			t.Fatalf("BirthRoot(%q) = %x %x %v", tc, tid, sid, ok)
		}
	}
	for _, tc := range []string{"", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-zz-b7ad6b7169203331-01"} {
		if _, _, ok := BirthRoot(tc); ok {
			t.Errorf("BirthRoot(%q) passes", tc)
		}
	}
}
