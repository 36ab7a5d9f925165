# Kagzi. `make run` shows workflows running; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
PG_URL = $$(scripts/ensure-postgres.sh)

.PHONY: test test-auth run build lint fuzz bench-store bench chaos vendor-js

## test: start Postgres if none is reachable (and, as root, install iproute2
## for the failover test's network namespaces and chromium for the console's
## browser tests if missing), download the modules (also the pinned
## nats-server the tests build on first use and run as processes), then run
## every test with -race, and the
## end-to-end suite once more with NATS authorization on (test-auth).
## Screenshots of the console land in artifacts/console/.
test:
	$(GO) mod download
	$(GO) -C internal/testnats/natsbin mod download
	@# Builds the pinned nats-server (once; then cached) outside the timed tests.
	$(GO) test -count=1 -run '^TestStartConnectStop$$' ./internal/testnats/
	@scripts/ensure-iproute2.sh
	@scripts/ensure-chromium.sh
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" $(GO) test -race -count=1 -timeout 9m ./...
	@$(MAKE) --no-print-directory test-auth

## test-auth: the end-to-end suite on a NATS server with the users and
## permissions of `kagzi nats-config`, every component connecting as its role.
test-auth:
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" KAGZI_E2E_NATS_AUTH=1 $(GO) test -race -count=1 -timeout 9m ./internal/e2e/

## build: build every binary into bin/.
build:
	$(GO) build -o bin/ ./...

## run: migrate a local database "kagzi" and run every service with example runs (kagzi dev --demo).
run:
	$(GO) mod download
	@url="$$(scripts/ensure-postgres.sh kagzi)"; echo "database: $$url"; KAGZI_DATABASE_URL="$$url" $(GO) run ./cmd/kagzi dev --demo

## lint: formatting and vet.
lint:
	@out="$$(gofmt -l .)"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## bench-store: the store's claim-and-complete benchmark and claim plan.
bench-store:
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" $(GO) test -run '^$$' -bench BenchmarkClaimComplete -benchtime 1x -timeout 30m ./internal/store/

## bench: every `kagzi bench` scenario, one JSON document each, with every
## service as its own process (several minutes; not part of `make test`).
## BENCH_SCENARIOS picks scenarios, BENCH_FLAGS adds flags. See docs/BENCHMARKS.md.
BENCH_SCENARIOS ?= throughput latency sleep idle scale connections cron recovery
bench:
	$(GO) mod download
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) build -o "$$tmp/kagzi" ./cmd/kagzi || exit 1; \
	url="$(PG_URL)"; \
	for s in $(BENCH_SCENARIOS); do \
		echo "kagzi bench --scenario $$s --json $(BENCH_FLAGS)" >&2; \
		"$$tmp/kagzi" bench --database-url "$$url" --scenario "$$s" --json $(BENCH_FLAGS) || exit 1; \
	done

## chaos: `kagzi chaos`: 10,000 runs while workers, a dispatcher, a scheduler,
## the reaper, NATS and Postgres are killed or restarted; checks that nothing was
## lost or applied twice and exits 1 on any violation (a few minutes; not part of
## `make test`). It runs its own Postgres cluster and NATS server. CHAOS_FLAGS
## adds flags (e.g. CHAOS_FLAGS="--runs 500 --duration 20s"; CHAOS_FLAGS="--model
## --regressions internal/modeltest/testdata/regressions.json" runs 3,000 random
## programs of the model test instead). See docs/BENCHMARKS.md.
chaos:
	$(GO) mod download
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) build -o "$$tmp/kagzi" ./cmd/kagzi || exit 1; \
	"$$tmp/kagzi" chaos $(CHAOS_FLAGS)

## fuzz: run every fuzz target for FUZZTIME (default 60s) each.
fuzz:
	KAGZI_TEST_DATABASE_URL="$(PG_URL)" scripts/fuzz.sh

## vendor-js: refresh the console's vendored htmx from npm (needs npm; go
## build never does). HTMX_VERSION picks another version.
vendor-js:
	scripts/vendor-htmx.sh
