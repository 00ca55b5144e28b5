#!/usr/bin/env bash
# The lint layer of `make test`: formatting, clippy with warnings denied over the workspace, and the
# rules of DEVELOPMENT.md that a compiler cannot check. Each check says what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$HOME/.cargo/bin:$PATH

failed=0
fail() { echo "lint: $*" >&2; failed=1; }

echo "== lint: rustfmt"
cargo fmt --all -- --check || fail "the tree is not formatted: run cargo fmt --all"

echo "== lint: clippy (warnings denied)"
# --all-targets includes the #[pg_test] modules and the harness tests.
cargo clippy --workspace --all-targets --features pg_test -- -D warnings || fail "clippy found warnings"
# The extension again as built for 18: src/version.rs's other branch.
cargo clippy -p pg_jobqueue --all-targets --no-default-features --features pg18,pg_test -- -D warnings ||
  fail "clippy found warnings in the build for PostgreSQL 18"

# The code of a file without its #[pg_test] module (everything before the module's cfg line) and
# without comment lines.
code_of() {
  awk '/^#\[cfg\(any\(test, feature = "pg_test"\)\)\]/ && seen_code { exit } { seen_code = 1; print }' "$1" |
    grep -v '^[[:space:]]*//'
}

echo "== lint: only src/db runs SQL"
for file in $(find src -name '*.rs' ! -path 'src/db/*' ! -name testing.rs | sort); do
  if code_of "$file" | grep -nE 'Spi::|SpiClient|prepare_mut|\.select\(|\.update\(' >/dev/null; then
    fail "$file runs SQL itself; go through src/db: $(code_of "$file" | grep -nE 'Spi::|SpiClient|prepare_mut|\.select\(|\.update\(' | head -3)"
  fi
done

echo "== lint: no helper takes a transaction id up front"
# client.update(), Spi::run and Spi::get_* assign one whether the statement writes or not.
for file in src/db/*.rs; do
  if code_of "$file" | grep -nE '\.update\(|Spi::run|Spi::get_' >/dev/null; then
    fail "$file uses an SPI call that takes a transaction id up front"
  fi
done

echo "== lint: every unsafe block says why it is sound"
# An `unsafe {` (or `unsafe impl`) needs a `// SAFETY:` comment on one of the three lines above it
# or on its own line. `unsafe fn` declarations say their contract in their doc comment instead.
while IFS= read -r file; do
  awk -v file="$file" '
    { line[NR] = $0 }
    /unsafe[[:space:]]*\{|unsafe impl/ && !/^[[:space:]]*\/\// {
      ok = ($0 ~ /SAFETY:/)
      for (i = NR - 1; i >= NR - 3 && i > 0; i--) if (line[i] ~ /SAFETY/) ok = 1
      if (!ok) { printf "%s:%d: unsafe without a SAFETY comment\n", file, NR; bad = 1 }
    }
    END { exit bad }' "$file" || fail "unsafe blocks without a SAFETY comment in $file"
done < <(find src worker/src dashboard/src tests/harness -name '*.rs' | sort)

echo "== lint: imports run level or down a floor, and close no circle"
# The floors and the map: scripts/imports.py (run it without --check to print every arrow).
python3 scripts/imports.py --check || fail "an import runs up a floor or closes a circle (scripts/imports.py)"

echo "== lint: comments cite what is in the repository"
# Documents outside the repository, and the tracker, mean nothing to a reader of a clean clone.
if grep -rnE 'SPEC\b|[Ii]ssue #?[0-9]+|Boundary [0-9]+|[Gg]uarantee [0-9]+' \
    src sql/schema sql/queries tests scripts bench worker/src dashboard/src dashboard/sql dashboard/tests README.md DEVELOPMENT.md Makefile \
    --exclude=lint.sh; then
  fail "the lines above cite documents that are not in the repository"
fi
# And a section cited in the guide or the README by its quoted title is a heading of that document.
python3 scripts/docs.py citations >/dev/null || { python3 scripts/docs.py citations; fail "a citation names no heading"; }

if [ "$failed" -ne 0 ]; then
  echo "test result: lint. 0 passed; 1 failed"
  exit 1
fi
echo "test result: lint. 1 passed; 0 failed"
