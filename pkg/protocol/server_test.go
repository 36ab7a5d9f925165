package protocol_test

import (
	"errors"
	"testing"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func TestCheckServerVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"2.9.0": true, "2.9.10": true, "2.10.0": true, "2.15.1": true, "3.0.0": true, "2.11.0-RC.1": true, "v2.12.3": true,
		"2.8.4": false, "2.2.0": false, "1.4.1": false, "2.9": false, "": false, "x.y.z": false, "2.-1.0": false,
	} {
		err := protocol.CheckServerVersion(v)
		if ok != (err == nil) {
			t.Errorf("CheckServerVersion(%q) = %v, want ok=%v", v, err, ok)
		}
		if err != nil && !errors.Is(err, protocol.ErrServerVersion) {
			t.Errorf("CheckServerVersion(%q) = %v, not ErrServerVersion", v, err)
		}
	}
}
