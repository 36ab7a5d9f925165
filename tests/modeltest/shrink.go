package modeltest

import (
	"fmt"
	"strings"
)

// Shrink returns the smallest program it finds from p that still fails
// test: greedily, it tries every one-step simplification (drop an op, a
// branch, a child, a cleanup step or an outcome; make an outcome a success;
// inline a branch or a child's ops; handle an error instead of returning
// it; make a detached child's policy TERMINATE; drop a policy detail, the
// run's retry policy or deadline) and keeps the first that still
// fails, until none does or tries candidates were run. test gets batch
// candidates at a time (it may run them concurrently) and says which fail.
// Each candidate has a key of its own ("<p.Key>~<n>"), since it is a run
// of its own. It returns the program and the candidates tried.
func Shrink(p Program, tries, batch int, test func([]Program) []bool) (Program, int) {
	cur := p
	n := 0
	base := p.Key
	if i := strings.IndexByte(base, '~'); i >= 0 {
		base = base[:i]
	}
	batch = max(batch, 1)
	for progress := true; progress && n < tries; {
		progress = false
		for k := 0; n < tries && !progress; {
			var cands []Program
			for len(cands) < batch && n < tries {
				q := cur.Clone()
				if !mutate(&q, k) {
					break
				}
				k++
				n++
				cands = append(cands, q.WithKey(fmt.Sprintf("%s~%d", base, n)))
			}
			if len(cands) == 0 {
				break
			}
			for i, failed := range test(cands) {
				if failed {
					cur, progress = cands[i], true
					break
				}
			}
		}
	}
	return cur, n
}

// mutate applies the k-th simplification of p; false when p has fewer.
func mutate(p *Program, k int) bool {
	m := &mutator{k: k}
	if p.RunRetry != nil && m.next() {
		p.RunRetry = nil
		return true
	}
	if p.DeadlineMS > 0 && m.next() {
		p.DeadlineMS = 0
		return true
	}
	return m.seq(&p.Ops)
}

type mutator struct{ k int }

// next reports whether the current site is the chosen one.
// dropChild removes one of op's children, if it has several.
func (m *mutator) dropChild(op *Op) bool {
	if len(op.Children) < 2 {
		return false
	}
	for j := range op.Children {
		if m.next() {
			op.Children = append(op.Children[:j:j], op.Children[j+1:]...)
			return true
		}
	}
	return false
}

func (m *mutator) next() bool {
	if m.k == 0 {
		m.k = -1
		return true
	}
	m.k--
	return false
}

func (m *mutator) seq(ops *[]Op) bool {
	for i := range *ops {
		if m.next() {
			*ops = append((*ops)[:i:i], (*ops)[i+1:]...)
			return true
		}
	}
	for i := range *ops {
		if m.op(ops, i) {
			return true
		}
	}
	return false
}

func (m *mutator) op(ops *[]Op, i int) bool {
	op := &(*ops)[i]
	if op.OnErr == OnErrReturn && m.next() {
		op.OnErr = OnErrHandle
		return true
	}
	if op.Cleanup != nil {
		if m.next() {
			op.Cleanup = nil
			return true
		}
		c := []Op{*op.Cleanup}
		if m.op(&c, 0) {
			*op.Cleanup = c[0]
			return true
		}
	}
	switch op.Kind {
	case KindStep:
		if len(op.Outcomes) > 1 && m.next() {
			op.Outcomes = op.Outcomes[:len(op.Outcomes)-1]
			return true
		}
		if len(op.Outcomes) > 1 && m.next() {
			op.Outcomes = op.Outcomes[1:]
			return true
		}
		for j := range op.Outcomes {
			if op.Outcomes[j].Kind != OutOK && m.next() {
				op.Outcomes[j] = Outcome{Kind: OutOK}
				return true
			}
		}
		if op.Retry != nil && len(op.Retry.NonRetryable) > 0 && m.next() {
			op.Retry.NonRetryable = nil
			return true
		}
		if op.Retry != nil && op.Retry.Coefficient != 0 && m.next() {
			op.Retry.Coefficient = 0
			return true
		}
		if op.TimeoutMS > 0 && m.next() {
			op.TimeoutMS = 0
			for j := range op.Outcomes {
				if op.Outcomes[j].Kind == OutTimeout {
					op.Outcomes[j] = Outcome{Kind: OutFail}
				}
			}
			return true
		}
	case KindWait:
		if op.Send != SendNever && m.next() {
			op.Send = SendNever
			op.TimeoutMS = 50
			return true
		}
	case KindDetach:
		if m.dropChild(op) {
			return true
		}
		for j := range op.Children {
			c := &op.Children[j]
			if c.Policy != PolicyTerminate && m.next() {
				c.Policy = PolicyTerminate
				return true
			}
			if c.Retry != nil && c.Retry.MaxAttempts > 1 && m.next() {
				c.Retry.MaxAttempts = 1
				return true
			}
			// The hold op stays first.
			cops := &c.Program.Ops
			for k := 1; k < len(*cops); k++ {
				if m.next() {
					*cops = append((*cops)[:k:k], (*cops)[k+1:]...)
					return true
				}
			}
			for k := range *cops {
				if m.op(cops, k) {
					return true
				}
			}
		}
	case KindChildren:
		for j := range op.Children {
			// The child's ops in the parent's place (not those that cancel,
			// terminate or detach: the parent's may not be where they can).
			if stops(op.Children[j].Program.Ops) {
				continue
			}
			if m.next() {
				inl := append([]Op(nil), op.Children[j].Program.Ops...)
				rest := append(inl, (*ops)[i+1:]...)
				*ops = append((*ops)[:i:i], rest...)
				return true
			}
		}
		if m.dropChild(op) {
			return true
		}
		for j := range op.Children {
			c := &op.Children[j]
			if c.Retry != nil && c.Retry.MaxAttempts > 1 && m.next() {
				c.Retry.MaxAttempts = 1
				return true
			}
			if len(c.Program.Ops) > 0 && m.seq(&c.Program.Ops) {
				return true
			}
		}
	case KindParallel:
		for b := range op.Branches {
			if m.next() {
				inl := append([]Op(nil), op.Branches[b]...)
				rest := append(inl, (*ops)[i+1:]...)
				*ops = append((*ops)[:i:i], rest...)
				return true
			}
		}
		if len(op.Branches) > 1 {
			for b := range op.Branches {
				if m.next() {
					op.Branches = append(op.Branches[:b:b], op.Branches[b+1:]...)
					return true
				}
			}
		}
		if op.Mode == ModeFailFast && m.next() {
			op.Mode = ModeCollectAll
			return true
		}
		for b := range op.Branches {
			if m.seq(&op.Branches[b]) {
				return true
			}
		}
	}
	return false
}

// stops reports whether ops (children's programs excluded) cancel,
// terminate, detach or hold.
func stops(ops []Op) bool {
	found := false
	Walk(ops, func(op *Op) {
		switch op.Kind {
		case KindCancel, KindTerminate, KindDetach, KindHold:
			found = true
		}
	})
	return found
}
