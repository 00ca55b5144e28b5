# pg_jobqueue: `make demo` and `make test` each set up whatever this machine lacks first.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
# The PostgreSQL version to build, install, test and benchmark against: 15 or 18 (`make test PG=18`).
PG ?= 15
export PG

.PHONY: all setup setup-build build install release install-release lint test test-unit test-regress test-pgsuite test-isolation test-integration test-browser test-cluster test-package test-readme test-docs docs package demo soak bench bench-quick bench-cluster bench-claim bench-profile bench-reap bench-schema bench-upgrade bench-dashboard bench-dag bench-fanout bench-keys bench-enqueue clean

all: build

# What building needs (setup-build), and what the tests, the demo and the benchmarks need besides
# (setup); see scripts/setup.sh.
setup:
	@scripts/setup.sh test

setup-build:
	@scripts/setup.sh build

build: setup-build
	cargo build

# The debug build, as the tests and the demo use it: it builds in a fraction of the time.
# scripts/stage.sh builds the files to install (with the frozen install scripts of released
# versions, so that an old version can be installed and upgraded, and the router extension), and
# scripts/install.sh renames each over the installed one, never rewriting a file that a running
# server has mapped.
install: setup-build
	@stage=$$(scripts/stage.sh debug) && scripts/install.sh "$$stage"

# The optimized build, for production and benchmarks.
install-release: setup-build
	@stage=$$(scripts/stage.sh release) && scripts/install.sh "$$stage"

# The Debian packages postgresql-15-pg-jobqueue and pg-jobqueue-worker, in target/debian
# (scripts/package.sh).
package: setup-build
	@scripts/package.sh

# Every test layer: #[pg_test] unit and plan tests, pg_regress files, PostgreSQL's own regression
# suite with and without preloading, isolation specs, multi-connection tests. On 15 (the default),
# then the core layers on 18 (scripts/test.sh core), which is what fits CI's time; `make test PG=18`
# runs every layer on 18.
test: setup install
	@scripts/test.sh all
	@if [ "$(PG)" = 15 ]; then stage=$$(PG=18 scripts/stage.sh debug) && scripts/install.sh "$$stage" && PG=18 scripts/test.sh core; fi

# Formatting, clippy with warnings denied, and the code rules of DEVELOPMENT.md (scripts/lint.sh).
lint: setup
	@scripts/lint.sh

test-unit: setup install
	@scripts/test.sh unit

test-regress: setup install
	@scripts/test.sh regress

# PostgreSQL's own regression suite, without the library preloaded and with it: preloading must
# change no test (scripts/pgsuite.sh; setup fetches and builds the suite once per machine).
test-pgsuite: setup install
	@scripts/test.sh pgsuite

test-isolation: setup install
	@scripts/test.sh isolation

test-integration: setup install
	@scripts/test.sh integration

# jq-dashboard's pages in headless Chromium through chromedriver: what each shows against the
# database, its buttons, and what a monitor-only role and a forged POST cannot do; screenshots in
# target/screenshots.
test-browser: setup install
	@scripts/test.sh browser

# The integration tests with several servers (part of test-integration): failover to a promoted
# standby, and queues over three servers behind a PL/Proxy router.
test-cluster: setup install
	@scripts/test.sh cluster

# The user guide, docs/src, as a book in docs/book (mdBook, pinned; scripts/setup.sh docs installs
# it), after its links and its language pass scripts/docs.py. Needs no server: the examples and the
# reference against the catalog are tested by test-readme and test-docs.
docs:
	@scripts/setup.sh docs
	@scripts/docs.py links && scripts/docs.py language && mdbook build docs

# Every SQL example of README.md and the guide, in order on a fresh server per document, its shown
# output compared.
test-readme: setup install
	@scripts/test.sh readme

test-docs: setup install
	@scripts/test.sh docs

# Builds the packages, installs them with apt in place of `make install`'s build, uses and removes
# them, then puts that build back.
test-package: setup install
	@scripts/test.sh package

# The randomized fault history at length (make soak OPS=50000), and 20 crashes right after bursts of claims.
OPS ?= 20000
soak: setup install
	@JQ_SOAK_OPS=$(OPS) cargo test -p jq-harness --test faults boundary_12 -- --nocapture
	@JQ_CRASH_ROUNDS=20 cargo test -p jq-harness --test durability claims_lost -- --nocapture

# pg_jobqueue side by side with the classic SKIP LOCKED queue and pgmq, on one throwaway server;
# see bench/README.md. The full run takes about 31 minutes; bench-quick (one short run of each) a few.
# The system interpreter, for Debian's python3-psycopg (W8).
bench: setup install-release
	@/usr/bin/python3 bench/run.py

bench-quick: setup install-release
	@/usr/bin/python3 bench/run.py --quick

# W1 and W3 through the router (pg_jobqueue_router) over 1, 2 and 3 servers, against one server
# called directly, in one run of about 5 minutes; see bench/README.md ("Queues over several servers").
bench-cluster: setup install-release
	@/usr/bin/python3 bench/cluster.py

# What inline recovery and a concurrency limit cost a claim; see bench/claim_overhead.sh.
bench-claim: setup install
	@bench/claim_overhead.sh

# What jq_jobs' CHECK constraints and arrival-order index cost; see bench/schema_cost.sh.
bench-schema: setup install-release
	@bench/schema_cost.sh

# Where the server's CPU goes per W3 job, against the SKIP LOCKED queue; see bench/profile.sh.
bench-profile: setup install-release
	@bench/profile.sh

# What a workflow costs a job against one without dependencies, in one session, job by job in
# turn; see bench/dag_cost.sh.
bench-dag: setup install-release
	@bench/dag_cost.sh

# What a completion costs with 30,000 jobs waiting on it against one with none, in one session,
# job by job in turn; see bench/fanout_cost.sh.
bench-fanout: setup install-release
	@bench/fanout_cost.sh

# What a concurrency key costs a job against one without, in one session, job by job in turn; see
# bench/key_cost.sh.
bench-keys: setup install-release
	@bench/key_cost.sh

# What an enqueue is made of: W1 and W2 with the hot table's indexes, CHECK and function each taken
# away in turn, against the baseline and pgmq; see bench/enqueue_cost.sh.
bench-enqueue: setup install-release
	@bench/enqueue_cost.sh

# How soon the background reaper reaps an expired lease; see bench/reap_latency.sh.
bench-reap: setup install
	@bench/reap_latency.sh

# What ALTER EXTENSION pg_jobqueue UPDATE from 0.2.0 costs a database of JOBS jobs while clients call:
# time, locks, WAL, what the clients see (bench/upgrade_cost.py; make bench-upgrade JOBS=200000).
# The debug build: the update's work is its script's SQL.
JOBS ?= 1000000
bench-upgrade: setup install
	@/usr/bin/python3 bench/upgrade_cost.py --jobs $(JOBS)

# What jq-dashboard's overview, a queue's page and /dead cost with 1,000 queues and 1,000,000 jobs
# (the median of several GETs), and EXPLAIN of each of its statements (bench/dashboard.py).
bench-dashboard: setup install-release
	@cargo build --release -p jq-dashboard
	@/usr/bin/python3 bench/dashboard.py

# Needs only what building needs (setup-build: PostgreSQL 15, its headers, clang; no cargo-pgrx).
# Releases the version of Cargo.toml: freezes its install script, dates its CHANGELOG entry,
# commits and tags it, builds its packages and records the commit (scripts/release.sh;
# DEVELOPMENT.md, "Releasing").
release: setup-build
	@scripts/release.sh "$(VERSION)"

demo: install
	@scripts/demo.sh

clean:
	cargo clean
