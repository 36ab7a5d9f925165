package main

import (
	"encoding/json"
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
)

func TestAttributeCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("attribute", "declare", "customer", "keyword")
	c.ok("attribute", "declare", "tags", "keyword")
	c.ok("attribute", "declare", "amount", "int")
	var attrs []attributeJSON
	c.okJSON(&attrs, "attribute", "list")
	if len(attrs) != 3 || attrs[0].Name != "amount" || attrs[0].Kind != "int" {
		t.Fatalf("attribute list: %+v", attrs)
	}
	_, errOut := c.fails(cliutil.ExitUsage, "attribute", "declare", "status", "keyword")
	mustContain(t, "declare a built-in", errOut, "built-in field")

	var started startJSON
	c.okJSON(&started, "run", "start", "T", "--attr", "customer=42", "--attr", "tags=a", "--attr", "tags=b", "--attr", "amount=7")
	c.ok("run", "start", "T", "--attr", "customer=7")
	_, errOut = c.fails(cliutil.ExitUsage, "run", "start", "T", "--attr", "amount=seven")
	mustContain(t, "a bad int", errOut, "--attr amount=seven: not a int value")
	_, errOut = c.fails(cliutil.ExitUsage, "run", "start", "T", "--attr", "nope=1")
	mustContain(t, "undeclared", errOut, "nope: not declared", "amount, customer, tags")

	var page runsPage
	c.okJSON(&page, "run", "list", "--query", `customer = "42" AND tags = 'b' AND amount > 5`)
	if len(page.Runs) != 1 || page.Runs[0].RunID.String() != started.RunID {
		t.Fatalf("run list --query: %+v", page.Runs)
	}
	_, errOut = c.fails(cliutil.ExitUsage, "run", "list", "--query", `amount = 'x'`)
	mustContain(t, "a query of the wrong kind", errOut, "is not a int value")

	out := c.ok("run", "show", started.RunID)
	mustContain(t, "run show", out, "Attribute customer:", "42", "Attribute tags:", "a, b")
	var show struct {
		Attributes map[string]any `json:"attributes"`
	}
	c.okJSON(&show, "run", "show", started.RunID)
	if b, _ := json.Marshal(show.Attributes); string(b) != `{"amount":7,"customer":"42","tags":["a","b"]}` {
		t.Errorf("run show --json attributes: %s", b)
	}

	var n countJSON
	c.okJSON(&n, "run", "count", "--group-by", "customer")
	if n.Total != 2 || len(n.Groups) != 2 || *n.Groups[0].Value != "42" && *n.Groups[0].Value != "7" {
		t.Fatalf("run count: %+v", n)
	}
	out = c.ok("run", "count", "--query", "customer = '7'")
	mustContain(t, "run count", out, "1")
	_, errOut = c.fails(cliutil.ExitFailed, "attribute", "delete", "customer")
	mustContain(t, "delete a held attribute", errOut, "runs hold values of it")
}
