package startbatch

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store/internal/core"
	"github.com/kagzi/kagzi/pkg/store/internal/runstore"
)

// Limits of a batch option.
const (
	// MaxKeyLen bounds a batch key (bytes).
	MaxKeyLen = 256
	// MaxSize bounds a batch's MaxSize: the items of one run.
	MaxSize = 10000
	// MaxWait bounds a batch's MaxWait.
	MaxWait = 24 * time.Hour
	// flushLimit bounds the batches one FlushDue closes.
	flushLimit = 50
)

// ErrStartBatch is a malformed batch option or a start option a batched
// start cannot take; it is an ErrInvalidArgument.
var ErrStartBatch = fmt.Errorf("%w: start batch", core.ErrInvalidArgument)

// Spec is a batch option: the items of one (namespace, workflow type,
// queue, Key) go into one open batch, which becomes a run when it holds
// MaxSize items or MaxWait after its first item, whichever is first. The
// open batch keeps the MaxSize and MaxWait of the item that opened it.
type Spec struct {
	Key     string
	MaxSize int
	MaxWait time.Duration
}

// Check checks a batch option (ErrStartBatch).
func (b Spec) Check() error {
	switch {
	case len(b.Key) > MaxKeyLen || !utf8.ValidString(b.Key) || !core.PGText(b.Key):
		return fmt.Errorf("%w: key must be at most %d bytes of UTF-8 text without NUL, is %d bytes", ErrStartBatch, MaxKeyLen, len(b.Key))
	case b.MaxSize < 1 || b.MaxSize > MaxSize:
		return fmt.Errorf("%w: max size must be 1 to %d, is %d", ErrStartBatch, MaxSize, b.MaxSize)
	case b.MaxWait < time.Millisecond || b.MaxWait > MaxWait:
		return fmt.Errorf("%w: max wait must be 1ms to %s, is %s", ErrStartBatch, MaxWait, b.MaxWait)
	}
	return nil
}

// AddParams are one item to add to its open batch.
type AddParams struct {
	Namespace, Queue, Type string
	Batch                  Spec
	// Payload is the item's JSON (empty: null); the batch's run gets the
	// list of its items' payloads.
	Payload []byte
	// EventID and TriggerID name the event and trigger that added the
	// item (zero for a start): one item per pair.
	EventID, TriggerID uuid.UUID
}

// Added is what StartBatchesAdd did.
type Added struct {
	ItemID, BatchID uuid.UUID
	// Seq is the item's place in its batch, from 0.
	Seq int
	// RunID is the batch's run when this item closed it (it was the
	// MaxSize-th); zero while the batch is open.
	RunID uuid.UUID
}

// Item is an item and what became of it.
type Item struct {
	ItemID, BatchID uuid.UUID
	Seq             int
	Key             string
	// RunID is nil while the batch is open.
	RunID   *uuid.UUID
	AddedAt time.Time
}

// Batch is a start batch, open or closed.
type Batch struct {
	ID                   uuid.UUID
	Key, Type, Queue     string
	Size, MaxSize        int
	OpenedAt, DeadlineAt time.Time
	RunID                *uuid.UUID
	ClosedAt             *time.Time
}

// StartBatches holds the statements of start batches over one executor.
// Package store's Store embeds it, so its methods are the Store's.
type StartBatches struct {
	h core.Handle
	runsPart
}

// runsPart is embedded under an unexported name: a batch's run is created
// by the runs' own statements.
type runsPart = runstore.Runs

// New returns the statements over h.
func New(h core.Handle) StartBatches { return StartBatches{h: h, runsPart: runstore.New(h)} }

// inTx runs fn in a transaction (a savepoint when s is already bound to
// one) and commits if fn returns nil.
func (s *StartBatches) inTx(ctx context.Context, fn func(tx *StartBatches) error) error {
	tx, err := s.h.BeginTx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	h := s.h.WithTx(tx)
	if err := fn(&StartBatches{h: h, runsPart: runstore.New(h)}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return core.MapErr("commit", err)
	}
	return nil
}

//go:embed sql/*.sql
var sqlFS embed.FS

var sqlBlocks = core.MustLoadSQL(sqlFS)

// stmt returns the statement named name; package variables call it.
func stmt(name string) *core.NamedSQL { return sqlBlocks.Stmt(name) }

var (
	lockOpenSQL = stmt("StartBatchesLockOpen")
	itemsAddSQL = stmt("StartBatchItemsAdd")
	inputSQL    = stmt("StartBatchesInput")
	setRunSQL   = stmt("StartBatchesSetRun")
	lockDueSQL  = stmt("StartBatchesLockDue")
	nextDueSQL  = stmt("StartBatchesNextDue")
	itemsGetSQL = stmt("StartBatchItemsGet")
	listSQL     = stmt("StartBatchesList")
)

// ExternalID is the external id of a batch's run: it links the run to its
// batch, and would refuse a second run of the batch.
func ExternalID(batch uuid.UUID) string { return "batch:" + batch.String() }

// StartBatchesAdd adds an item to the open batch of its (namespace, type,
// queue, key), opening one if there is none, in one transaction (a
// savepoint of the caller's, if s is bound to one): the item exists only
// if that commits. Adds to one batch are serialised by its row lock,
// which the reaper's close takes too. The item that makes the batch hold
// its MaxSize items closes it: the batch's run is created in the same
// transaction. An item that would take the batch's input over the payload
// limit closes the batch without it first, and opens the next. Bad input
// is ErrInvalidArgument (ErrStartBatch for the option), a payload over
// the limit ErrPayloadTooLarge; a refusal stores nothing.
func (s *StartBatches) StartBatchesAdd(ctx context.Context, p AddParams) (Added, error) {
	for _, c := range []struct{ what, v string }{{"namespace", p.Namespace}, {"queue", p.Queue}, {"workflow type", p.Type}} {
		if err := protocol.ValidToken(c.what, c.v); err != nil {
			return Added{}, core.Invalidf("%v", err)
		}
	}
	if err := p.Batch.Check(); err != nil {
		return Added{}, err
	}
	if len(p.Payload) == 0 {
		p.Payload = []byte("null")
	}
	if !json.Valid(p.Payload) || !utf8.Valid(p.Payload) {
		return Added{}, core.Invalidf("batch item is not JSON text")
	}
	if err := s.h.CheckPayload(ctx, "batch item", p.Payload); err != nil {
		return Added{}, err
	}
	lim, err := s.h.Limits(ctx)
	if err != nil {
		return Added{}, err
	}
	if len(p.Payload)+2 > lim.PayloadMaxBytes { // a list of it alone must fit a run's input
		return Added{}, fmt.Errorf("%w: batch item is %d bytes, a batch of it alone would be over the limit of %d", core.ErrPayloadTooLarge,
			len(p.Payload), lim.PayloadMaxBytes)
	}
	out := Added{}
	if out.ItemID, err = uuid.NewV7(); err != nil {
		return Added{}, fmt.Errorf("generate item id: %w", err)
	}
	err = s.inTx(ctx, func(tx *StartBatches) error {
		batch, size, maxSize, err := tx.lockOpen(ctx, p)
		if err != nil {
			return err
		}
		if size.n > 0 && size.bytes+int64(size.n)+2+int64(len(p.Payload)) > int64(lim.PayloadMaxBytes) {
			// The item would take the input over the limit: the batch
			// becomes a run without it.
			if _, err := tx.close(ctx, batch); err != nil {
				return err
			}
			if batch, size, maxSize, err = tx.lockOpen(ctx, p); err != nil {
				return err
			}
		}
		var n int
		err = itemsAddSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"item_id": out.ItemID, "batch_id": batch, "payload": string(p.Payload),
			"event_id": nilID(p.EventID), "trigger_id": nilID(p.TriggerID), "bytes": len(p.Payload)}).Scan(&n)
		if err != nil {
			return core.MapErr("add batch item", err)
		}
		out.BatchID, out.Seq = batch, n-1
		if n >= maxSize {
			out.RunID, err = tx.close(ctx, batch)
		}
		return err
	})
	if err != nil {
		return Added{}, err
	}
	return out, nil
}

type fill struct {
	n     int
	bytes int64
}

// lockOpen locks the open batch of p's (namespace, type, queue, key),
// opening one if there is none.
func (s *StartBatches) lockOpen(ctx context.Context, p AddParams) (uuid.UUID, fill, int, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fill{}, 0, fmt.Errorf("generate batch id: %w", err)
	}
	var (
		f       fill
		maxSize int
	)
	err = lockOpenSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"batch_id": id, "namespace": p.Namespace, "workflow_type": p.Type,
		"queue": p.Queue, "batch_key": p.Batch.Key, "max_size": p.Batch.MaxSize, "max_wait_ms": p.Batch.MaxWait.Milliseconds()}).
		Scan(&id, &f.n, &f.bytes, &maxSize)
	return id, f, maxSize, core.MapErr("open batch", err)
}

// close makes the locked open batch a run, whose input is the list of its
// items in order, and records the run on the batch.
func (s *StartBatches) close(ctx context.Context, batch uuid.UUID) (uuid.UUID, error) {
	var (
		p     runstore.RunsCreateParams
		input []byte
	)
	err := inputSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"batch_id": batch}).Scan(&p.Namespace, &p.Type, &p.Queue, &input)
	if err != nil {
		return uuid.Nil, core.MapErr("read batch", err)
	}
	p.ExternalID, p.Input = ExternalID(batch), input
	run, _, err := s.RunsCreate(ctx, p)
	if err != nil {
		return uuid.Nil, fmt.Errorf("start the run of batch %s: %w", batch, err)
	}
	_, err = setRunSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"batch_id": batch, "run_id": run.ID})
	return run.ID, core.MapErr("close batch", err)
}

// StartBatchesFlushDue closes the open batches due at now (up to a
// bounded number, earliest first), each into its run, in one transaction
// (the reaper's leader runs it fenced by its term). A batch an adder holds
// locked is skipped: that adder may close it, else a later flush does.
// It returns the runs started.
func (s *StartBatches) StartBatchesFlushDue(ctx context.Context, now time.Time) ([]uuid.UUID, error) {
	var runs []uuid.UUID
	err := s.inTx(ctx, func(tx *StartBatches) error {
		runs = nil
		rows, err := lockDueSQL.Query(ctx, tx.h.DB, pgx.NamedArgs{"now": now, "limit": flushLimit})
		if err != nil {
			return core.MapErr("lock due batches", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return core.MapErr("lock due batches", err)
		}
		for _, id := range ids {
			run, err := tx.close(ctx, id)
			if err != nil {
				return err
			}
			runs = append(runs, run)
		}
		return nil
	})
	return runs, err
}

// StartBatchesNextDue is the earliest deadline of an open batch (nil:
// none is open).
func (s *StartBatches) StartBatchesNextDue(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := nextDueSQL.QueryRowPos(ctx, s.h.DB).Scan(&t)
	return t, core.MapErr("next batch deadline", err)
}

// StartBatchItemsGet returns an item of the namespace and its batch's run
// (nil while open); ErrNotFound if there is none.
func (s *StartBatches) StartBatchItemsGet(ctx context.Context, ns string, item uuid.UUID) (Item, error) {
	var it Item
	err := itemsGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns, "item_id": item}).
		Scan(&it.ItemID, &it.BatchID, &it.Seq, &it.Key, &it.RunID, &it.AddedAt)
	return it, core.MapErr(fmt.Sprintf("batch item %s", item), err)
}

// StartBatchesList returns the namespace's batches, newest first, at most
// limit (1 to 1000), only the open ones if openOnly.
func (s *StartBatches) StartBatchesList(ctx context.Context, ns string, openOnly bool, limit int) ([]Batch, error) {
	if limit < 1 || limit > 1000 {
		return nil, core.Invalidf("limit must be 1 to 1000, is %d", limit)
	}
	rows, err := listSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns, "open_only": openOnly, "limit": limit})
	if err != nil {
		return nil, core.MapErr("list batches", err)
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Batch, error) {
		var b Batch
		err := r.Scan(&b.ID, &b.Key, &b.Type, &b.Queue, &b.Size, &b.MaxSize, &b.OpenedAt, &b.DeadlineAt, &b.RunID, &b.ClosedAt)
		return b, err
	})
	return bs, core.MapErr("list batches", err)
}

func nilID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}
