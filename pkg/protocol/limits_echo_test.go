package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEchoCutsLongNames(t *testing.T) {
	t.Parallel()
	if got := Echo("Short"); got != "Short" {
		t.Errorf("Echo(Short) = %q", got)
	}
	exact := strings.Repeat("é", MaxEchoLen)
	if got := Echo(exact); got != exact {
		t.Errorf("a name of exactly %d characters is cut: %q", MaxEchoLen, got)
	}
	got := Echo(strings.Repeat("é", 100<<10))
	if n := utf8.RuneCountInString(got); n != MaxEchoLen || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("Echo of 100 K characters: %d characters, %q", n, got)
	}
	err := ValidToken("workflow type", strings.Repeat("x", 1000)+" ")
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("ValidToken echoes a long name whole: %v", err)
	}
	err = ValidEventName(strings.Repeat("e", 100<<10))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("ValidEventName echoes a long name whole: %.300v", err)
	}
}
