# pg_jobqueue: `make demo` and `make test` each set up whatever this machine lacks first.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: all setup build install install-release lint test test-unit test-regress test-isolation test-integration test-cluster demo soak bench bench-quick bench-claim bench-profile bench-reap bench-schema clean

all: build

setup:
	@scripts/setup.sh

build: setup
	cargo build

# The debug build, as the tests and the demo use it: it builds in a fraction of the time.
# scripts/stage.sh builds the files to install (with the frozen install scripts of released
# versions, so that an old version can be installed and upgraded, and the router extension), and
# scripts/install.sh renames each over the installed one, never rewriting a file that a running
# server has mapped.
install: setup
	@scripts/install.sh "$$(scripts/stage.sh debug)"

# The optimized build, for production and benchmarks.
install-release: setup
	@scripts/install.sh "$$(scripts/stage.sh release)"

# Every test layer: #[pg_test] unit and plan tests, pg_regress files, isolation specs,
# multi-connection tests.
test: install
	@scripts/test.sh all

# Formatting, clippy with warnings denied, and the code rules of DEVELOPMENT.md (scripts/lint.sh).
lint: setup
	@scripts/lint.sh

test-unit: install
	@scripts/test.sh unit

test-regress: install
	@scripts/test.sh regress

test-isolation: install
	@scripts/test.sh isolation

test-integration: install
	@scripts/test.sh integration

# The integration tests with several servers (part of test-integration): failover to a promoted
# standby.
test-cluster: install
	@scripts/test.sh cluster

# The randomized fault history at length (make soak OPS=50000), and 20 crashes right after bursts of claims.
OPS ?= 20000
soak: install
	@JQ_SOAK_OPS=$(OPS) cargo test -p jq-harness --test faults boundary_12 -- --nocapture
	@JQ_CRASH_ROUNDS=20 cargo test -p jq-harness --test durability claims_lost -- --nocapture

# pg_jobqueue side by side with the classic SKIP LOCKED queue and pgmq, on one throwaway server;
# see bench/README.md. The full run takes about 31 minutes; bench-quick (one short run of each) a few.
# The system interpreter, for Debian's python3-psycopg (W8).
bench: install-release
	@/usr/bin/python3 bench/run.py

bench-quick: install-release
	@/usr/bin/python3 bench/run.py --quick

# What inline recovery and a concurrency limit cost a claim; see bench/claim_overhead.sh.
bench-claim: install
	@bench/claim_overhead.sh

# What jq_jobs' CHECK constraints and arrival-order index cost; see bench/schema_cost.sh.
bench-schema: install-release
	@bench/schema_cost.sh

# Where the server's CPU goes per W3 job, against the SKIP LOCKED queue; see bench/profile.sh.
bench-profile: install-release
	@bench/profile.sh

# How soon the background reaper reaps an expired lease; see bench/reap_latency.sh.
bench-reap: install
	@bench/reap_latency.sh

demo: install
	@scripts/demo.sh

clean:
	cargo clean
