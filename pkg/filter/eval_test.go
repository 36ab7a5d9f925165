package filter

import (
	"errors"
	"strings"
	"testing"
)

const testDoc = `{"amount": 150, "currency": "usd", "vip": true, "note": null, "tags": ["a"],
	"order": {"id": "T-1", "total": 12.5, "customer": {"name": "ada"}}, "big": 1e400}`

func TestMatch(t *testing.T) {
	doc, err := DecodeJSON([]byte(testDoc))
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]bool{
		``:                                      true,
		`amount > 100 AND currency = "usd"`:     true,
		`amount > 150`:                          false,
		`amount >= 150 AND amount <= 150.0`:     true,
		`amount = 1.5e2`:                        true,
		`amount != 150`:                         false,
		`amount IN (1, 150)`:                    true,
		`amount IN (1, 2)`:                      false,
		`currency IN ('eur', 'usd')`:            true,
		`currency < 'v' AND currency > 'u'`:     true,
		`currency STARTS_WITH 'us'`:             true,
		`currency STARTS_WITH 'x'`:              false,
		`vip = true`:                            true,
		`vip != false`:                          true,
		`order.total < 13 AND order.id = 'T-1'`: true,
		`order.customer.name = 'ada'`:           true,
		`order.customer.name.first = 'ada'`:     false, // a string has no keys
		`order.missing IS NULL`:                 true,
		`order.id IS NOT NULL`:                  true,
		`note IS NULL`:                          true,
		`note IS NOT NULL`:                      false,
		`note = 'x'`:                            false,
		// A missing key, or a value of another type, matches nothing,
		// != included; NOT inverts the whole predicate.
		`missing = 1`:                       false,
		`missing != 1`:                      false,
		`NOT missing = 1`:                   true,
		`amount = '150'`:                    false,
		`amount != '150'`:                   false,
		`currency = 1`:                      false,
		`currency > 1`:                      false,
		`vip = 1`:                           false,
		`tags = 'a'`:                        false,
		`order = 'x'`:                       false,
		`big > 0`:                           false, // out of float64's range
		`amount > 1000 OR vip = true`:       true,
		`NOT (amount > 1000 OR vip = true)`: false,
	} {
		e, err := Parse(q)
		if err == nil {
			err = CheckJSON(e)
		}
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		if got := Match(e, doc); got != want {
			t.Errorf("%s: Match %v, want %v", q, got, want)
		}
	}
	// A document that is not an object has no keys.
	for _, d := range []string{`null`, `[1]`, `"amount"`, `3`} {
		doc, err := DecodeJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := Parse(`amount = 3`)
		if Match(e, doc) {
			t.Errorf("%s matches amount = 3", d)
		}
		e, _ = Parse(`amount IS NULL`)
		if !Match(e, doc) {
			t.Errorf("%s: amount IS NULL does not match", d)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	for q, want := range map[string]string{
		`a STARTS_WITH 1`: "STARTS_WITH takes a string",
		`a < true`:        "is a boolean",
		`a = 1e999`:       "not a finite number",
		`a IN (1, 2e999)`: "not a finite number",
		`a.b > false`:     "is a boolean",
	} {
		e, err := Parse(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		err = CheckJSON(e)
		var fe *Error
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an *Error with %q", q, err, want)
		}
	}
}

func TestDottedFields(t *testing.T) {
	e, err := Parse(`order.customer.name = 'ada' AND a_1.b2 IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.String(), `order.customer.name = 'ada' AND a_1.b2 IS NULL`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for q, want := range map[string]string{
		`a. = 1`:   "malformed number",
		`a..b = 1`: "malformed number",
		`a.1 = 1`:  "expected an operator",
		`.a = 1`:   "malformed number",
	} {
		_, err := Parse(q)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", q, err, want)
		}
	}
	// A dotted field is no built-in column nor attribute of a run query.
	e, _ = Parse(`status.x = 'a'`)
	if err := Check(e, testFields); err == nil || !strings.Contains(err.Error(), `unknown field "status.x"`) {
		t.Errorf("got %v", err)
	}
}
