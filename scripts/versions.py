#!/usr/bin/env python3
"""The version check: every file name with a version that the docs give a reader is one the build
makes, and the CHANGELOG says what each version is.

    scripts/versions.py        the last line is `test result: versions. N passed; M failed`

The one version is `[workspace.package] version` of Cargo.toml (DEVELOPMENT.md, "Releasing").
Read: README.md, DEVELOPMENT.md, the guide (docs/src), worker/README.md, the man pages, the
examples, monitoring/ and the bench's README. It fails, naming the file and line, on:

  * a package file `postgresql-NN-pg-jobqueue_V_ARCH.deb` or `pg-jobqueue-worker_V_ARCH.deb` whose
    V is not the version (`make package` makes only that one), or whose NN is not a server version
    the build supports (15, 18);
  * an install or upgrade script `pg_jobqueue--V.sql`, `pg_jobqueue--A--B.sql` (or the router's)
    that neither sql/ nor sql/released/ has, nor the build makes (the install script of the
    version);
  * "V (in development)" or "V, the version in development" for a released V (one whose install
    script is frozen in sql/released/).

And in CHANGELOG.md: the first entry is the version; each released version has an entry with its
date, `## V (YYYY-MM-DD)`, and names the commit it was released from (`Released from commit
HASH`), a commit of this repository whose Cargo.toml has that version (not checked in a shallow
clone, which lacks the history), except in the release commit itself, which cannot name itself
(scripts/release.sh records it in the next); the version's entry, when it is not released, says
`(in development)`.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_VERSIONS = {"15", "18"}
DOCS = ["README.md", "DEVELOPMENT.md", "worker/README.md", "bench/README.md"]
DOC_DIRS = ["docs/src", "examples", "monitoring", "worker/man", "dashboard/man"]

passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what}")


def version():
    text = (ROOT / "Cargo.toml").read_text()
    section = re.search(r"^\[workspace\.package\]\n(.*?)(?=^\[)", text, re.S | re.M)
    return re.search(r'^version = "([^"]+)"$', section.group(1), re.M).group(1)


def documents():
    for name in DOCS:
        yield ROOT / name
    for directory in DOC_DIRS:
        for path in sorted((ROOT / directory).rglob("*")):
            if path.is_file() and path.suffix in {".md", ".sql", ".py", ".yml", ".yaml", ".1", ".sh"}:
                yield path


def released():
    return {p.name[len("pg_jobqueue--"):-len(".sql")] for p in (ROOT / "sql/released").glob("pg_jobqueue--*.sql")}


def main():
    current = version()
    frozen = released()
    scripts = {p.name for p in (ROOT / "sql").glob("*.sql")} | {p.name for p in (ROOT / "sql/router").glob("*.sql")}
    scripts |= {p.name for p in (ROOT / "sql/released").glob("*.sql")} | {f"pg_jobqueue--{current}.sql"}
    deb = re.compile(r"\b(postgresql-(\d+)-pg-jobqueue|pg-jobqueue-worker)_([0-9][0-9.]*[0-9])_([a-z0-9]+)\.deb")
    script = re.compile(r"\bpg_jobqueue(?:_router)?--[0-9][0-9.]*[0-9](?:--[0-9][0-9.]*[0-9])?\.sql")
    in_development = re.compile(r"\b(\d+\.\d+\.\d+)(?: \(in development\)|, the version in development)")
    for path in documents():
        relative = path.relative_to(ROOT)
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            where = f"{relative}:{number}"
            for m in deb.finditer(line):
                check(m.group(3) == current, f"{where}: {m.group(0)}: the build makes version {current}")
                if m.group(2):
                    check(m.group(2) in SERVER_VERSIONS, f"{where}: {m.group(0)}: no package for PostgreSQL {m.group(2)}")
            for m in script.finditer(line):
                check(m.group(0) in scripts, f"{where}: {m.group(0)}: no such script in sql/, sql/released/ or the build")
            for m in in_development.finditer(line):
                check(m.group(1) not in frozen, f"{where}: {m.group(0)}: {m.group(1)} is released (sql/released/)")
    changelog(current, frozen)
    print(f"test result: versions. {passed} passed; {failed} failed")
    return 1 if failed else 0


def changelog(current, frozen):
    text = (ROOT / "CHANGELOG.md").read_text()
    entries = list(re.finditer(r"^## (\S+)(?: \((.*?)\))?$", text, re.M))
    check(entries and entries[0].group(1) == current, f"CHANGELOG.md: its first entry is {current}, the version")
    by_version = {}
    for i, m in enumerate(entries):
        end = entries[i + 1].start() if i + 1 < len(entries) else len(text)
        by_version[m.group(1)] = (m.group(2) or "", text[m.end():end])
    shallow = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"],
                             capture_output=True, text=True).stdout.strip() != "false"
    for v in sorted(frozen | {current}):
        note, body = by_version.get(v, (None, ""))
        if note is None:
            check(False, f"CHANGELOG.md: no entry for {v}")
            continue
        if v not in frozen:
            check(note == "in development", f"CHANGELOG.md: {v} is not released (no sql/released/pg_jobqueue--{v}.sql), "
                                            f"so its entry says (in development), not ({note})")
            continue
        check(re.fullmatch(r"\d{4}-\d{2}-\d{2}", note) is not None, f"CHANGELOG.md: released {v} has its date, not ({note})")
        commit = re.search(r"Released from commit ([0-9a-f]{7,40})\b", body)
        if commit is None and not shallow and froze(v) == head():
            # The release commit itself, which cannot name itself: the next commit records it
            # (scripts/release.sh).
            continue
        check(commit is not None, f"CHANGELOG.md: released {v} names the commit it was released from")
        if commit and not shallow:
            shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit.group(1)}:Cargo.toml"],
                                   capture_output=True, text=True)
            check(shown.returncode == 0 and re.search(rf'^version = "{re.escape(v)}"$', shown.stdout, re.M),
                  f"CHANGELOG.md: commit {commit.group(1)} of {v} exists and its Cargo.toml says {v}")


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()


def head():
    return git("rev-parse", "HEAD")


def froze(v):
    """The commit that added the frozen install script of version v."""
    return git("log", "--diff-filter=A", "--format=%H", "-1", "--", f"sql/released/pg_jobqueue--{v}.sql")


if __name__ == "__main__":
    sys.exit(main())
