package filter

import (
	"errors"
	"strings"
	"testing"
)

var testFields = Fields(func(name string) (Kind, bool) {
	k, ok := map[string]Kind{"status": Keyword, "customer": Keyword, "note": Text, "amount": Int,
		"score": Float, "vip": Bool, "created_at": Time}[name]
	return k, ok
})

func TestParseAndString(t *testing.T) {
	for q, want := range map[string]string{
		`customer = "42" and status='FAILED'`:       `customer = '42' AND status = 'FAILED'`,
		`(a = 1 AND b = 2) AND c = 3`:               `a = 1 AND b = 2 AND c = 3`,
		`(a = 1 OR b = 2) AND c <> 3`:               `(a = 1 OR b = 2) AND c != 3`,
		`NOT (a = 'it''s')`:                         `NOT a = 'it''s'`,
		`NOT (a = 1 or b is not null)`:              `NOT (a = 1 OR b IS NOT NULL)`,
		`tags IN ('x', "y",'z')`:                    `tags IN ('x', 'y', 'z')`,
		`name starts_with 'ab' OR x is null`:        `name STARTS_WITH 'ab' OR x IS NULL`,
		`score >= -1.5e3 and vip = TRUE and n <= 0`: `score >= -1.5e3 AND vip = true AND n <= 0`,
		`((((a = 1))))`:                             `a = 1`,
		"  ":                                        "",
	} {
		e, err := Parse(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		got := ""
		if e != nil {
			got = e.String()
		}
		if got != want {
			t.Errorf("%s: got %s, want %s", q, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for q, want := range map[string]string{
		`a =`:                                "at 3: expected a value",
		`a = 'x`:                             "at 4: unterminated string",
		`(a = 1`:                             "expected ')'",
		`a == 1`:                             "expected a value",
		`a = 1 b = 2`:                        `unexpected "b"`,
		`AND = 1`:                            "expected a field name",
		`a IN ()`:                            "expected a value",
		`a ! 1`:                              "'!' must be followed by '='",
		`a = 1x`:                             "malformed number",
		`a IS 1`:                             "expected NULL",
		`a ; 1`:                              "unexpected character",
		strings.Repeat("NOT ", 32) + "a = 1": "nests 33 deep",
		strings.Repeat("a = 1 OR ", 64) + "a = 1":      "more than 64 predicates",
		"a = '" + strings.Repeat("x", MaxLength) + "'": "above the maximum 4096",
	} {
		_, err := Parse(q)
		var fe *Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40s: got %v, want an *Error with %q", q, err, want)
		}
	}
	if _, err := Parse(strings.Repeat("NOT ", 31) + "a = 1"); err != nil {
		t.Errorf("depth 32: %v", err)
	}
}

func TestCheck(t *testing.T) {
	ok := []string{
		`customer = '42' AND status IN ('FAILED', 'COMPLETED')`,
		`amount > 10 AND score < 2.5 AND vip = false`,
		`created_at >= '2025-01-02T03:04:05Z' AND note STARTS_WITH 'x'`,
		`NOT customer IS NULL`,
	}
	for _, q := range ok {
		e, err := Parse(q)
		if err == nil {
			err = Check(e, testFields)
		}
		if err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	for q, want := range map[string]string{
		`nope = 1`:                 `unknown field "nope"`,
		`amount = 'abc'`:           `'abc' is not a int value`,
		`amount = 1.5`:             "not a 64-bit integer",
		`customer = 42`:            "42 is not a keyword value",
		`vip > true`:               "compare it with = or !=",
		`amount STARTS_WITH 'a'`:   "STARTS_WITH applies",
		`created_at > 'yesterday'`: "not an RFC 3339 time",
		`score = 1e999`:            "not a finite number",
	} {
		e, err := Parse(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		if err := Check(e, testFields); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", q, err, want)
		}
	}
}

// FuzzParse: no input panics the parser, and what parses round-trips
// through String to the same canonical form.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`a = 1`, `NOT (a = 'x''y' OR b IN (1, 2.5, true)) AND c IS NOT NULL`,
		`x STARTS_WITH "q" or y <> -3e2`, `((a=1))`, `a = '`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		e, err := Parse(q)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("%q: an error that is not an *Error: %v", q, err)
			}
			return
		}
		if e == nil {
			return
		}
		_ = Check(e, testFields)
		s := e.String()
		if len(s) > MaxLength {
			return // the canonical form spaces what the query packed
		}
		e2, err := Parse(s)
		if err != nil {
			t.Fatalf("%q: its String %q does not parse: %v", q, s, err)
		}
		if s2 := e2.String(); s2 != s {
			t.Fatalf("%q: String %q parses back to %q", q, s, s2)
		}
	})
}
