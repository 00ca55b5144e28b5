#!/usr/bin/env python3
"""Checks of the user docs (README.md and the guide, docs/src), run by `make docs` and the docs
layer of `make test`:

    scripts/docs.py links       every relative link leads to a file of the repository, and every
                                #anchor to a heading of its target (GitHub's and mdBook's ids)
    scripts/docs.py citations   every `guide, "X"` or `README, "X"` of the code and the developers'
                                documents names a heading of the guide or the README
    scripts/docs.py language    no internal language: the docs speak to users, so they name no
                                test function or test file, no commit, no bench code they do not
                                define (W1..W12 are defined in the guide's Performance chapter),
                                and not the machine the project is developed on

Each prints what it found as FILE:LINE: text and exits 1 if it found anything.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^\s*```")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def documents():
    """README.md and every chapter of the guide."""
    return [ROOT / "README.md"] + sorted((ROOT / "docs/src").glob("*.md"))


def prose(path):
    """(line number, line) of the text outside code blocks."""
    inside = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def slug(heading):
    """A heading's id, as GitHub and mdBook make it."""
    out = []
    for ch in heading.strip().lower():
        if ch.isalnum() or ch in "_-":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def anchors(path):
    return {slug(re.sub(r"^#+\s+", "", line)) for _, line in prose(path) if re.match(r"#{1,6}\s", line)}


def links():
    found = []
    for path in documents():
        for number, line in prose(path):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):  # https:, mailto:
                    continue
                file, _, anchor = target.partition("#")
                goal = (path.parent / file).resolve() if file else path
                if not goal.exists():
                    found.append(f"{path.relative_to(ROOT)}:{number}: no file {file}")
                elif anchor and goal.suffix == ".md" and anchor not in anchors(goal):
                    found.append(f"{path.relative_to(ROOT)}:{number}: no heading #{anchor} in {file or path.name}")
    return found


# What a user's document does not say, each with the reason it gives.
INTERNAL = [
    (re.compile(r"\b[a-z0-9]+(?:_[a-z0-9]+){4,}\b"), "a test function's name"),
    (re.compile(r"\b[\w/]*\w+\.rs\b|tests/harness|\bpg_test\b|#\[test\]"), "a test or source file"),
    (re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])"), "a commit"),
    (re.compile(r"this (?:project's )?(?:2-core |two-core |build |development )?machine|\bthe project's machine|"
                r"\bon this machine|\bhere's machine", re.I), "the development machine"),
]
# Identifiers of five words and more that are not a test's name: settings, functions, columns.
ALLOWED = re.compile(r"^(?:jq|pg|max|warn|inline|reaper|stats|shared|lease|log|statement|idle|"
                     r"track|wal|autovacuum|old|hot|default|key|held|oldest|claimable|expiring|"
                     r"synchronous|regexp|null|run|wait|stale|counted|last|starvation|retry|rate|"
                     r"concurrency|enable|effective|vacuum|lock|deadlock)_")
BENCH_CODE = re.compile(r"\bW(\d{1,2})\b")
BENCH_DEFINED = re.compile(r"^\|\s*W(\d{1,2})\s*\|")


def language():
    found = []
    for path in documents():
        defined = {m.group(1) for _, line in prose(path) for m in [BENCH_DEFINED.match(line)] if m}
        for number, line in prose(path):
            for pattern, what in INTERNAL:
                for match in pattern.finditer(line):
                    if what == "a test function's name" and ALLOWED.match(match.group(0)):
                        continue
                    found.append(f"{path.relative_to(ROOT)}:{number}: {what}: {match.group(0)}")
            for match in BENCH_CODE.finditer(line):
                if match.group(1) not in defined and "performance.md" not in line:
                    found.append(f"{path.relative_to(ROOT)}:{number}: a bench code not defined here "
                                 f"(link the Performance chapter): {match.group(0)}")
    return found


# A citation in code or a developer's document: `guide, "Storage"` or `README, "Install"`, the
# quoted heading perhaps wrapped over comment lines.
CITATION = re.compile(r'(?<![/\w])(?:the )?(guide|README)(?:\.md)?(?:,? \(?| says so \()"([A-Za-z][^"]*)"')
CITED = ["src", "sql/schema", "sql/queries", "sql/pg_jobqueue--0.2.0--0.3.0.sql", "tests", "scripts",
         "bench", "worker/src", "worker/tests", "dashboard/src", "dashboard/sql", "dashboard/tests", "examples",
         "monitoring", "Makefile", "DEVELOPMENT.md",
         "CHANGELOG.md"]


def citations():
    """Every `guide, "X"` and `README, "X"` of the code and the developers' documents names a
    heading of that document."""
    headings = {
        "README": {re.sub(r"^#+\s+", "", line).strip() for _, line in prose(ROOT / "README.md")
                   if re.match(r"#{1,6}\s", line)},
        "guide": {re.sub(r"^#+\s+", "", line).strip() for path in sorted((ROOT / "docs/src").glob("*.md"))
                  for _, line in prose(path) if re.match(r"#{1,6}\s", line)},
    }
    found = []
    for top in CITED:
        base = ROOT / top
        for path in sorted([base] if base.is_file() else base.rglob("*")):
            if not path.is_file() or path.suffix not in (".rs", ".sql", ".py", ".sh", ".md", ".yaml", ".yml", "") \
                    or "target" in path.parts or path.name == "docs.py":
                continue
            text = path.read_text(errors="replace")
            for match in CITATION.finditer(text):
                heading = re.sub(r"\s*\n\s*(?://[/!]?|--|#)?\s*", " ", match.group(2)).strip()
                if heading not in headings[match.group(1)]:
                    number = text[: match.start()].count("\n") + 1
                    found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(1)} has no heading \"{heading}\"")
    return found


def main():
    checks = {"links": links, "language": language, "citations": citations}
    if len(sys.argv) != 2 or sys.argv[1] not in checks:
        print(__doc__, file=sys.stderr)
        return 2
    found = checks[sys.argv[1]]()
    for line in found:
        print(line)
    print(f"docs {sys.argv[1]}: {len(found)} found")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
