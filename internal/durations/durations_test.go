package durations

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{250 * time.Millisecond, "250ms"},
		{1500 * time.Millisecond, "1.5s"},
		{90 * time.Second, "1m30s"},
		{5 * time.Minute, "5m"},
		{time.Hour, "1h"},
		{time.Hour + 30*time.Minute, "1h30m"},
		{time.Hour + 5*time.Second, "1h0m5s"},
		{Day, "1d"},
		{7 * Day, "7d"},
		{36*time.Hour + time.Minute, "1d12h1m"},
		{100 * 365 * Day, "36500d"},
		{-2 * time.Hour, "-2h"},
		{math.MaxInt64, "106751d23h47m16.854775807s"},
		{math.MinInt64, "-106751d23h47m16.854775807s"},
	} {
		if got := Format(tc.d); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", int64(tc.d), got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"7d", 7 * Day},
		{"1d12h", 36 * time.Hour},
		{"90m", 90 * time.Minute},
		{"1.5s", 1500 * time.Millisecond},
		{"-1h", -time.Hour},
		{"106751d", 106751 * Day},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	// What Format prints, Parse reads back.
	for _, d := range []time.Duration{time.Millisecond, 90 * time.Second, 36*time.Hour + time.Minute, 36500 * Day} {
		if got, err := Parse(Format(d)); err != nil || got != d {
			t.Errorf("Parse(Format(%v)) = %v, %v", d, got, err)
		}
	}
}

func TestParseTooLong(t *testing.T) {
	for _, in := range []string{"1000000d", "106752d", "99999999999999999999d", "3000000h", "106751d24h", "9999999999999999999ns"} {
		if _, err := Parse(in); !errors.Is(err, ErrTooLong) {
			t.Errorf("Parse(%q): %v, want ErrTooLong", in, err)
		}
	}
	for _, in := range []string{"", "d", "7x", "1d-2h", "-d", "1.5d", "forever", "1d1d"} {
		_, err := Parse(in)
		if err == nil || errors.Is(err, ErrTooLong) {
			t.Errorf("Parse(%q): %v, want a format error", in, err)
		}
	}
}
