package main

import (
	"testing"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
)

// trigger create --batch-* stores the batch option and lists it; a bad
// one exits 2 and stores nothing.
func TestTriggerBatchFlags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var made ops.TriggerJSON
	c.okJSON(&made, "trigger", "create", "agg", "--event", "order.*", "--type", "Agg", "--batch-key", "k", "--batch-max-size", "50",
		"--batch-max-wait", "30s")
	if made.Batch == nil || made.Batch.Key != "k" || made.Batch.MaxSize != 50 || made.Batch.MaxWaitMS != (30*time.Second).Milliseconds() {
		t.Fatalf("created %+v", made)
	}
	for _, bad := range [][]string{{"--batch-max-size", "0"}, {"--batch-max-size", "10001"}, {"--batch-max-size", "5", "--batch-max-wait", "25h"},
		{"--batch-key", "k"}} {
		_, errOut := c.fails(cliutil.ExitUsage, append([]string{"trigger", "create", "bad", "--event", "a", "--type", "T"}, bad...)...)
		mustContain(t, "bad batch", errOut, "start batch")
	}
	var list struct {
		Triggers []ops.TriggerJSON `json:"triggers"`
	}
	c.okJSON(&list, "trigger", "list")
	if len(list.Triggers) != 1 || list.Triggers[0].Batch == nil || *list.Triggers[0].Batch != *made.Batch {
		t.Fatalf("listed %+v", list.Triggers)
	}
}
