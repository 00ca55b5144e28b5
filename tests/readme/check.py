#!/usr/bin/env python3
"""The docs test: every ```sql example of the documents runs, in order, in one psql session against
a fresh server per document, and where a document shows its output (a plain ``` block right after
it), the output must match. So the docs cannot drift from what the extension does. The documents:
README.md, and the user guide, docs/src, its chapters in the order of docs/src/SUMMARY.md.

    tests/readme/check.py                      both; the last line is `test result: readme. ...`
    tests/readme/check.py guide                one of them (readme or guide)
    tests/readme/check.py guide --show N       print what example N (1-based) of it prints, to paste

Conventions of the documents, for the examples:
  * ```sql blocks run, in the order they appear, in one psql session of database `postgres` (psql's
    \\gset variables carry from one to the next). The server is new, preloaded with pg_jobqueue and
    pg_cron; the extension is what the examples create.
  * A signature is shown in a ```text block: it does not run.
  * `<!-- readme: database NAME -->` on the line before a block runs it in a database of that name
    (a router's, say), made for the first such block, each block in a session of its own.
  * A plain ``` block right after an example is its output, compared line by line after masking
    what changes from run to run (timestamps, fractions of seconds, widths of psql's columns);
    psql's row counts, `(1 row)`, may be left out.
    Errors, notices and warnings are compared as psql prints them, without their `psql:` prefix.
  * An example without an output block must not raise an error.
  * `<!-- readme: excerpt PATH -->` on the line before a block (of any language) says it is quoted
    from the file PATH of the repository: the block, dedented, must appear in it line for line
    (counted as one example, not run).
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# The server version of scripts/pgversion.sh: PG, 15 unless set.
PG = os.environ.get("PG", "15")
PG_BIN = Path(f"/usr/lib/postgresql/{PG}/bin")
PSQL = str(PG_BIN / "psql")
# Extensions some examples create that Debian packages for PostgreSQL 15 only: on a server without
# one, the examples that create it are skipped and counted, and in a database of its own (the
# router's) every later example too.
OPTIONAL = ("pg_cron", "plproxy")
MESSAGE = re.compile(r"^(ERROR|DETAIL|HINT|NOTICE|WARNING|INFO|CONTEXT):")


class Example:
    def __init__(self, number, where, sql, expected, database):
        self.number, self.where, self.sql, self.expected, self.database = number, where, sql, expected, database


def documents():
    """Each document's files, in order: the guide's are the chapters SUMMARY.md links to."""
    summary = (ROOT / "docs/src/SUMMARY.md").read_text()
    chapters = [ROOT / "docs/src" / link for link in re.findall(r"\]\(([^)#]+\.md)\)", summary)]
    return {"readme": [ROOT / "README.md"], "guide": chapters}


def examples(files):
    """Every ```sql block of the files, in order, with the output block after it (if any)."""
    found = []
    for path in files:
        found += examples_of(path.read_text(), path.relative_to(ROOT), len(found))
    needs = {}
    for example in found:
        made = re.findall(r"CREATE EXTENSION (?:IF NOT EXISTS )?(\w+)", example.sql)
        example.needs = {e for e in made if e in OPTIONAL}
        if example.database != "postgres":
            needs.setdefault(example.database, set()).update(example.needs)
            example.needs = set(needs[example.database])
    return found


def examples_of(readme, path, numbered):
    """The examples of one file, numbered on from `numbered`."""
    found = []
    # A fence may be indented (an example inside a list item): its lines are, by as much.
    fence = re.compile(r"^( *)```(\S*)\n(.*?)^\1```[ \t]*\n", re.M | re.S)
    blocks = list(fence.finditer(readme))
    body = lambda block: textwrap.dedent(block.group(3))
    for i, block in enumerate(blocks):
        if block.group(2) != "sql":
            continue
        before = readme[: block.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = re.match(r"<!-- readme: database (\w+) -->", before.strip())
        expected = None
        if i + 1 < len(blocks) and blocks[i + 1].group(2) == "":
            between = readme[block.end() : blocks[i + 1].start()]
            if between.strip() == "":
                expected = body(blocks[i + 1])
        line = readme[: block.start()].count("\n") + 1
        found.append(Example(numbered + len(found) + 1, f"{path}:{line}", body(block), expected,
                             directive.group(1) if directive else "postgres"))
    return found


def excerpts(files):
    """Every block quoted from a file (`<!-- readme: excerpt PATH -->`): (where, path, body)."""
    found = []
    fence = re.compile(r"^( *)```(\S*)\n(.*?)^\1```[ \t]*\n", re.M | re.S)
    for path in files:
        text = path.read_text()
        for block in fence.finditer(text):
            before = text[: block.start()].rstrip("\n").rsplit("\n", 1)[-1]
            directive = re.match(r"<!-- readme: excerpt (\S+) -->", before.strip())
            if directive:
                line = text[: block.start()].count("\n") + 1
                found.append((f"{path.relative_to(ROOT)}:{line}", directive.group(1), textwrap.dedent(block.group(3))))
    return found


def check_excerpts(files):
    """(passed, failed) of the quoted blocks: each must still be in its file, line for line."""
    passed = failed = 0
    for where, source, body in excerpts(files):
        quoted = ROOT / source
        if quoted.is_file() and body in quoted.read_text():
            passed += 1
        else:
            failed += 1
            print(f"{where}: the block quoted from {source} is not in it as shown\n")
    return passed, failed


def installed(extension):
    """Whether the server's version has the extension's control file."""
    sharedir = subprocess.run([PG_BIN / "pg_config", "--sharedir"], capture_output=True, text=True,
                              check=True).stdout.strip()
    return Path(sharedir, "extension", f"{extension}.control").exists()


def mask(text):
    """What is compared of an output: no blank lines, no run-to-run values, no column widths."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"^psql:[^:]*:\d+: ", "", line)
        line = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d(:\d\d)?)?", "<time>", line)
        line = re.sub(r"\b\d\d:\d\d:\d\d\.\d+", "<elapsed>", line)
        line = re.sub(r"\b\d+\.\d+e[+-]?\d+|\b0\.\d{4,}", "<number>", line)
        line = re.sub(r"-{2,}", "-", line)
        line = re.sub(r"\s+", " ", line).strip()
        # psql's row counts may be left out of the README.
        if line and not re.fullmatch(r"\(\d+ rows?\)", line):
            lines.append(line)
    return lines


def run_session(port, database, batch):
    """Runs examples in one psql session; their stdout and stderr, split per example."""
    script = ["\\set VERBOSITY default", "\\pset pager off"]
    for example in batch:
        script += [f"\\echo <<<{example.number}>>>", f"\\warn <<<{example.number}>>>", example.sql]
    done = subprocess.run(
        [PSQL, "-X", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", database],
        input="\n".join(script) + "\n", capture_output=True, text=True,
        env={**os.environ, "PGTZ": "UTC", "PGOPTIONS": "-c lc_messages=C"},
    )
    def split(stream):
        parts, current = {}, None
        for line in stream.splitlines():
            marker = re.fullmatch(r"<<<(\d+)>>>", line.strip())
            if marker:
                current = int(marker.group(1))
                parts[current] = []
            elif current is not None:
                parts[current].append(line)
        return {n: "\n".join(lines) for n, lines in parts.items()}
    return split(done.stdout), split(done.stderr)


def start_server(preload):
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    number = port.getsockname()[1]
    port.close()
    parent = tempfile.mkdtemp(prefix="pg_jobqueue-readme.")
    os.chmod(parent, 0o755)  # the server runs as postgres
    data = os.path.join(parent, "data")
    subprocess.run([ROOT / "scripts/pg.sh", "start", data, str(number),
                    f"shared_preload_libraries = '{', '.join(preload)}'", "cron.database_name = 'postgres'"],
                   check=True)
    return number, parent, data


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("document", nargs="?", choices=["readme", "guide"], help="one document only")
    parser.add_argument("--show", type=int, metavar="N", help="print what example N prints")
    args = parser.parse_args()
    if args.show and not args.document:
        parser.error("--show needs the document")
    names = [args.document] if args.document else ["readme", "guide"]
    passed = failed = 0
    for name in names:
        result = check(name, documents()[name], args.show)
        if args.show:
            return 0
        quoted = check_excerpts(documents()[name])
        if sum(quoted):
            print(f"{name}: {quoted[0]} excerpts as in their files, {quoted[1]} not")
        passed, failed = passed + result[0] + quoted[0], failed + result[1] + quoted[1]
    print(f"test result: readme. {passed} passed; {failed} failed")
    return 1 if failed else 0


def check(name, files, show):
    """Runs the examples of one document on a fresh server: (passed, failed)."""
    found = examples(files)
    missing = {e for e in OPTIONAL if not installed(e)}
    skipped = [e for e in found if e.needs & missing]
    found = [e for e in found if not e.needs & missing]
    port, parent, data = start_server(["pg_jobqueue"] + ([] if "pg_cron" in missing else ["pg_cron"]))
    try:
        # The examples of database postgres in one session; each other one in a database of its own.
        outputs, errors = run_session(port, "postgres", [e for e in found if e.database == "postgres"])
        created = set()
        for example in (e for e in found if e.database != "postgres"):
            if example.database not in created:
                subprocess.run([PSQL, "-X", "-q", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                                "-d", "postgres", "-c", f"CREATE DATABASE {example.database}"], check=True)
                created.add(example.database)
            out, err = run_session(port, example.database, [example])
            outputs.update(out)
            errors.update(err)
        if show:
            print(outputs.get(show, ""))
            print(errors.get(show, ""), file=sys.stderr)
            return 0, 0
        passed = failed = 0
        for example in found:
            out, err = outputs.get(example.number, ""), errors.get(example.number, "")
            messages = [line for line in mask(err) if MESSAGE.match(line)]
            if example.expected is None:
                ok = not any(line.startswith("ERROR:") for line in messages)
                why = "raised an error:\n  " + "\n  ".join(messages)
            else:
                want = mask(example.expected)
                want_messages = [line for line in want if MESSAGE.match(line)]
                want_rows = [line for line in want if not MESSAGE.match(line)]
                ok = mask(out) == want_rows and messages == want_messages
                why = ("printed:\n  " + "\n  ".join(mask(out) + messages)
                       + "\nbut the document shows:\n  " + "\n  ".join(want_rows + want_messages))
            if ok:
                passed += 1
            else:
                failed += 1
                print(f"{example.where}: example {example.number} {why}\n")
        if skipped:
            print(f"skipped on PostgreSQL {PG}, which lacks {', '.join(sorted(missing))}: "
                  f"{len(skipped)} examples ({', '.join(e.where for e in skipped)})")
        print(f"{name}: {passed} examples passed, {failed} failed")
        return passed, failed
    finally:
        subprocess.run([ROOT / "scripts/pg.sh", "stop", data], check=False)
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
