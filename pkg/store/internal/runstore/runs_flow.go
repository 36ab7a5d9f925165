package runstore

import (
	"context"
	"fmt"
)

// Flow control on the create path: a start may be debounced
// (runs_debounce.go) or carry an id reuse policy (runs_reuse.go). A start
// with neither takes RunsCreate's one statement as before; these take
// statements of their own.

// flow reports whether p asks for flow control on its start.
func (p RunsCreateParams) flow() bool { return p.Debounce != nil || p.IDReuse != "" }

// checkFlow checks p's debounce and id reuse options.
func checkFlow(p *RunsCreateParams) error {
	if err := checkDebounce(p); err != nil {
		return err
	}
	return checkIDReuse(p)
}

// runsCreateFlow starts the validated run p, which is debounced or has an
// id reuse policy.
func (s *Runs) runsCreateFlow(ctx context.Context, p RunsCreateParams, policy []byte) (run Run, created bool, err error) {
	if len(p.attrRows) == 0 {
		return s.runsCreateFlowOnly(ctx, p, policy)
	}
	// A run with attributes is created with them, in one transaction. The
	// flow statements may insert through runsCreate, which would insert
	// the attributes too: they go in once, here.
	bare := p
	bare.attrRows = nil
	err = s.inTx(ctx, func(tx *Runs) error {
		run, created, err = tx.runsCreateFlowOnly(ctx, bare, policy)
		if err != nil || !created {
			return err
		}
		return tx.attributesAdd(ctx, run.ID, p.attrRows)
	})
	return run, created, err
}

// runsCreateFlowOnly is runsCreateFlow without the run's attributes.
func (s *Runs) runsCreateFlowOnly(ctx context.Context, p RunsCreateParams, policy []byte) (Run, bool, error) {
	if p.Debounce != nil {
		return s.runsDebounce(ctx, p, policy)
	}
	return s.runsCreateReuse(ctx, p, policy)
}

// runsCreateMixed is runsCreate for a batch in which some rows ask for flow
// control: in one transaction, in the order of ps, each run of rows without
// it is inserted by runsCreate's statement and each row with it by its own,
// so a later row sees what an earlier one did (a second debounced row with
// one key merges into the first's run).
func (s *Runs) runsCreateMixed(ctx context.Context, ps []RunsCreateParams, policies [][]byte) ([]Run, []bool, error) {
	runs := make([]Run, len(ps))
	created := make([]bool, len(ps))
	err := s.inTx(ctx, func(tx *Runs) error {
		for i := 0; i < len(ps); {
			if ps[i].flow() {
				run, made, err := tx.runsCreateFlow(ctx, ps[i], policies[i])
				if err != nil {
					return wrapRow(len(ps), i, err)
				}
				runs[i], created[i] = run, made
				i++
				continue
			}
			j := i
			for j < len(ps) && !ps[j].flow() {
				j++
			}
			rs, made, err := tx.runsCreate(ctx, ps[i:j], policies[i:j])
			if err != nil {
				return err
			}
			copy(runs[i:j], rs)
			copy(created[i:j], made)
			i = j
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return runs, created, nil
}

// wrapRow says which row of a batch of n an error is about.
func wrapRow(n, i int, err error) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("row %d: %w", i, err)
}
