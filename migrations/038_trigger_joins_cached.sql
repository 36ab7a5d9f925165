-- The notify_runs trigger's joins of the transition tables (became due,
-- ended, freed a slot, cancelled while running, schedule changed) ran
-- through EXECUTE since 036, each planned for its own statement, because a
-- plan PL/pgSQL keeps is planned for the row counts of the call that
-- planned it (often a claim of one row: a nested loop, quadratic in the
-- rows of a later report). Planning the `done` join per report cost more
-- than running it (docs/BENCHMARKS.md, "Trigger joins planned once"). The
-- function is now declared with nested loops off and its joins are plain
-- statements: planned once per session, and the plan kept is a hash join,
-- linear in the rows at any count. Only the function changes: a service of
-- the previous version runs against it unchanged.

-- kagzi:function notify_runs

---- create above / drop below ----

-- The previous definition of notify_runs is 037_children_probe_planned.sql's;
-- the function's file in git at that migration holds it.
