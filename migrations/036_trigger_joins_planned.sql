-- The statement-level triggers on workflow_runs join the statement's
-- transition tables (new_rows, old_rows) to tell which runs became due,
-- ended, were cancelled while running or were asked to cancel. Those
-- joins now run through EXECUTE, each only when a pass over new_rows says
-- it can find something, so each is planned for the statement's row
-- counts. A PL/pgSQL statement's cached plan keeps the counts of the call
-- that planned it, often a claim of one row, and so joined by a nested
-- loop: quadratic in the runs a statement updates (17 ms for a report
-- ending 200 runs; docs/BENCHMARKS.md, "Trigger joins planned per
-- statement"). Only the functions change: a service of the previous
-- version runs against them unchanged.

-- kagzi:function notify_runs

-- kagzi:function cancellations

---- create above / drop below ----

-- The previous definitions are those of 007_hot_path.sql's pins; the
-- functions' files in git at that migration hold them.
