# Kagzi. `make run` shows workflows running; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
PG_URL = $$(scripts/ensure-postgres.sh)
# Every Go module, the root first: the CLI (cmd/kagzi), the deploy tests and
# the console's browser tests are modules of their own, which `./...` in
# the root does not reach (see docs/development.md, "Modules").
MODULES := $(shell scripts/modules.sh)

.PHONY: test test-auth test-faults test-ha test-pooler run build lint fuzz bench-store bench bench-targets chaos vendor-js download

## test: start Postgres if none is reachable (and, as root, install iproute2
## for the failover test's network namespaces, chromium for the console's
## browser tests, Debian's nats-server, the oldest supported, and Debian's
## pgbouncer, the pooler the services are tested through, jq, which
## the documentation's shell examples use, and python3-psycopg, which
## docs/sql.md's Python example uses, if missing), build the pinned nats-server the tests run
## as processes (once; then cached), then run every test of every module
## with -race, and the end-to-end suite once more with NATS authorization
## on (test-auth). Screenshots of the console land in artifacts/console/.
test: download
	@# Builds the pinned nats-server outside the timed tests.
	$(GO) test -count=1 -run '^TestStartConnectStop$$' ./tests/testnats/
	@scripts/ensure-iproute2.sh
	@scripts/ensure-chromium.sh
	@scripts/ensure-nats-server.sh
	@scripts/ensure-pgbouncer.sh
	@scripts/ensure-jq.sh
	@scripts/ensure-psycopg.sh
	@url="$(PG_URL)"; failed=(); \
	for m in $(MODULES); do \
		echo "go test -race ./... ($$m)"; \
		KAGZI_TEST_DATABASE_URL="$$url" $(GO) -C "$$m" test -race -count=1 -timeout 15m ./... || failed+=("$$m"); \
	done; \
	if (( $${#failed[@]} )); then echo "tests failed in: $${failed[*]}"; exit 1; fi
	@$(MAKE) --no-print-directory test-auth

## test-faults: the long fault cases of the end-to-end suite in full
## (KAGZI_E2E_FULL=1): frozen dispatchers, standbys and workers on every
## NATS server version (the pinned one and Debian's 2.9) and ping
## setting, frozen as long as first seen; a frozen worker's step after
## its run finished elsewhere; a batch through a killed reaper and one
## frozen 20 s; a trigger fan-out through a frozen reaper (only here).
## `make test` runs one quick case of each of the others; .ci/run runs
## this after it.
test-faults:
	@scripts/ensure-nats-server.sh
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" KAGZI_E2E_FULL=1 $(GO) test -race -count=1 -timeout 15m \
		-run 'TestFrozenDispatcherUnderLoad|TestFrozenStandbyDeposesNoOne|TestFrozenDispatcherStrandsNoWorker|TestFrozenWorkerRunsNoReleasedDelivery|TestFrozenWorkerBeginsNoStepOfARunFinishedElsewhere|TestBatchSurvivesKilledAndFrozenReaper|TestTriggersFanOutSurvivesFrozenReaper' ./tests/e2e/

## test-ha: the high-availability cases in full (KAGZI_HA_FULL=1, every
## TestHA test of the end-to-end suite): a node of a three-node NATS
## cluster killed, frozen 20 s and partitioned away 20 s under load, for
## the relay leader's node and the worker's, and the whole cluster
## restarted, on the pinned nats-server and Debian's 2.9 (installs
## iproute2 and Debian's nats-server and pgbouncer as root); then the
## suite through a pooler (test-pooler). `make test` runs one quick case
## of each; .ci/run runs this after test-faults.
test-ha:
	@scripts/ensure-nats-server.sh
	@scripts/ensure-iproute2.sh
	@scripts/ensure-pgbouncer.sh
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" KAGZI_HA_FULL=1 $(GO) test -race -count=1 -timeout 20m \
		-run '^TestHA' ./tests/e2e/
	@$(MAKE) --no-print-directory test-pooler

## download: the modules of every go.mod.
download:
	@for m in $(MODULES); do $(GO) -C "$$m" mod download || exit 1; done

## test-auth: the end-to-end suite on a NATS server with the users and
## permissions of `kagzi nats-config`, every component connecting as its role.
test-auth:
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" KAGZI_E2E_NATS_AUTH=1 $(GO) test -race -count=1 -timeout 15m ./tests/e2e/

## test-pooler: the end-to-end suite with every system the tests assemble
## doing its pooled work (services and client) through a PgBouncer in
## transaction mode and its sessions (the relay, the leaders) directly
## (KAGZI_E2E_PGBOUNCER; installs Debian's pgbouncer as root). Not part of
## `make test`, which runs the quick cases through the pooler.
test-pooler:
	@scripts/ensure-pgbouncer.sh
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" KAGZI_E2E_PGBOUNCER=1 $(GO) test -race -count=1 -timeout 15m ./tests/e2e/

## build: build every package of every module, every binary into bin/.
build:
	@for m in $(MODULES); do \
		echo "go build ($$m)"; \
		if [[ -n "$$($(GO) -C "$$m" list -f '{{if eq .Name "main"}}main{{end}}' ./...)" ]]; then \
			$(GO) -C "$$m" build -o "$(CURDIR)/bin/" ./... || exit 1; \
		else \
			$(GO) -C "$$m" build ./... || exit 1; \
		fi; \
	done

## run: migrate a local database "kagzi" and run every service with example runs (kagzi dev --demo).
## On a terminal, kagzi runs as the terminal's foreground job (set -m; the
## trailing exit keeps bash from exec'ing it in make's process group): Ctrl-C
## reaches it alone, it stops cleanly, and make ends as it does (0), instead
## of make dying of the same SIGINT with an error.
run:
	$(GO) -C cmd/kagzi mod download
	@if [[ -t 0 ]]; then set -m; fi; \
	url="$$(scripts/ensure-postgres.sh kagzi)"; echo "database: $$url"; KAGZI_DATABASE_URL="$$url" $(GO) -C cmd/kagzi run . dev --demo; \
	exit $$?

## schema: regenerate migrations/schema.sql, the schema a database migrated
## from empty has (pg_dump of schema kagzi); TestSchemaFileIsCurrent fails
## when it is stale.
.PHONY: schema
schema:
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" $(GO) generate ./migrations

## docs: regenerate the generated references, docs/configuration.md (from
## the configuration structs) and docs/cli.md (from the CLI's command
## tree); TestConfigurationReference and TestCLIReference fail when stale.
.PHONY: docs
docs:
	$(GO) test -count=1 -run '^TestConfigurationReference$$' ./internal/config -update
	$(GO) -C cmd/kagzi test -count=1 -run '^TestCLIReference$$' . -update

## tidy: go mod tidy in every module. A nested module requires the root at
## its release version, which a proxy serves only once it is tagged, so each
## is tidied with a replace by the root's directory for the while (and
## GOWORK=off, which tidy honours anyway), dropped again after.
.PHONY: tidy
tidy:
	@for m in $(MODULES); do \
		echo "go mod tidy ($$m)"; \
		if [[ $$m == . ]]; then GOWORK=off $(GO) mod tidy || exit 1; continue; fi; \
		rel=$$(realpath --relative-to="$$m" .); \
		req=$$(grep -E '^[[:space:]]*(require[[:space:]]+)?github\.com/kagzi/kagzi[[:space:]]' "$$m/go.mod"); \
		[[ -n $$req ]] && $(GO) -C "$$m" mod edit -replace "github.com/kagzi/kagzi=$$rel"; \
		GOWORK=off $(GO) -C "$$m" mod tidy; rc=$$?; \
		[[ -n $$req ]] && $(GO) -C "$$m" mod edit -dropreplace github.com/kagzi/kagzi; \
		(( rc == 0 )) || exit 1; \
	done

## lint: formatting, and vet in every module.
lint:
	@out="$$(gofmt -l .)"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do echo "go vet ($$m)"; $(GO) -C "$$m" vet ./... || exit 1; done

## bench-store: the store's claim-and-complete benchmark and claim plan.
bench-store:
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" $(GO) test -run '^$$' -bench BenchmarkClaimComplete -benchtime 1x -timeout 30m ./pkg/store/

## bench: every `kagzi bench` scenario, one JSON document each, with every
## service as its own process (several minutes; not part of `make test`).
## BENCH_SCENARIOS picks scenarios, BENCH_FLAGS adds flags. See docs/BENCHMARKS.md.
BENCH_SCENARIOS ?= throughput latency sleep idle scale connections cron recovery
bench:
	$(GO) -C cmd/kagzi mod download
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) -C cmd/kagzi build -o "$$tmp/kagzi" . || exit 1; \
	url="$(PG_URL)"; \
	for s in $(BENCH_SCENARIOS); do \
		echo "kagzi bench --scenario $$s --json $(BENCH_FLAGS)" >&2; \
		"$$tmp/kagzi" bench --database-url "$$url" --scenario "$$s" --json $(BENCH_FLAGS) || exit 1; \
	done

## bench-targets: `kagzi bench --scenario targets --own-postgres`: the
## throughput, latency and sleep-under-load figures beside River's, with
## their targets (a few minutes; not part of `make test`).
bench-targets:
	$(GO) -C cmd/kagzi mod download
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) -C cmd/kagzi build -o "$$tmp/kagzi" . || exit 1; \
	"$$tmp/kagzi" bench --database-url "$(PG_URL)" --scenario targets --own-postgres $(BENCH_FLAGS)

## chaos: `kagzi chaos`: 10,000 runs while workers, a dispatcher, a scheduler,
## the reaper, NATS and Postgres are killed or restarted; checks that nothing was
## lost or applied twice and exits 1 on any violation (a few minutes; not part of
## `make test`). It runs its own Postgres cluster and NATS server. CHAOS_FLAGS
## adds flags (e.g. CHAOS_FLAGS="--runs 500 --duration 20s"; CHAOS_FLAGS="--model
## --regressions tests/modeltest/testdata/regressions.json" runs 3,000 random
## programs of the model test instead). See docs/BENCHMARKS.md.
chaos:
	$(GO) -C cmd/kagzi mod download
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) -C cmd/kagzi build -o "$$tmp/kagzi" . || exit 1; \
	"$$tmp/kagzi" chaos $(CHAOS_FLAGS)

## fuzz: run every fuzz target of every module for FUZZTIME (default 60s) each.
fuzz:
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" scripts/fuzz.sh

## vendor-js: refresh the console's vendored htmx from npm (needs npm; go
## build never does). HTMX_VERSION picks another version.
vendor-js:
	scripts/vendor-htmx.sh

## soak: `kagzi bench --scenario soak`: SOAK_RATE starts/s (default 150, about half of what 2 cores sustain of this mix) of
## mixed runs (steps, sleeps, children, retries, failures) for SOAK_DURATION
## (default 30m) with a 1-minute retention, on a throwaway Postgres cluster
## with autovacuum on (--own-postgres); a line per minute, then the last 5
## minutes against minutes 2-7. SOAK_FLAGS adds flags (e.g. --json).
## Not part of `make test`.
SOAK_RATE ?= 150
SOAK_DURATION ?= 30m
.PHONY: soak
soak:
	$(GO) -C cmd/kagzi mod download
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) -C cmd/kagzi build -o "$$tmp/kagzi" . || exit 1; \
	"$$tmp/kagzi" bench --database-url "$(PG_URL)" --own-postgres --scenario soak --rate $(SOAK_RATE) --duration $(SOAK_DURATION) $(SOAK_FLAGS)

## test-upgrade: a rolling upgrade with runs in flight, from the commit
## before the newest migration (UPGRADE_FROM=<commit> for another;
## UPGRADE_ORDER, UPGRADE_RUNS) to this work tree: new migrations applied
## while the old services run, then each service replaced in turn; fails if
## a run does not complete or a step runs twice. Logs in
## artifacts/upgrade-test/ (scripts/upgrade-test.sh; not part of `make test`).
.PHONY: test-upgrade
test-upgrade:
	UPGRADE_DATABASE_URL="$(PG_URL)" bash scripts/upgrade-test.sh

## test-compose: deploy/compose.yaml through a real Docker engine (as root;
## not part of `make test`): installs Docker, Compose v2 and local stand-ins
## for the images no registry serves here, builds the image from the
## Dockerfile, brings the stack up and checks it through its containers,
## then takes it down (scripts/compose-test.sh; see docs/deployment.md,
## "Run with Docker Compose").
.PHONY: test-compose
test-compose:
	bash scripts/compose-test.sh
