#!/usr/bin/env python3
"""The reference test: the guide's reference chapters against the catalog, both ways.

    tests/readme/reference.py       the last line is `test result: reference. N passed; M failed`

It starts a throwaway server the way tests/readme/check.py does (pg_jobqueue preloaded, so that
its settings exist), runs CREATE EXTENSION pg_jobqueue, and lists every object of the extension
(pg_depend, deptype 'e') and every setting `pg_jobqueue.%` of pg_settings. Then it reads:

  * docs/src/functions.md: its ```text signature blocks. A signature starts at the left margin,
    `jq_name(arg type [DEFAULT value], ...) RETURNS type | SETOF type | TABLE(col type, ...)`,
    and continues on indented lines; `-- ...` is a comment. An event trigger is written
    `EVENT TRIGGER name ON event EXECUTE FUNCTION function()`.
  * docs/src/tables-and-views.md: its ```text blocks (indented ones in list items too), with
    `TYPE name AS ENUM ('label', ...)`, `TABLE name(col type, ...)`, `VIEW name(col type, ...)`,
    `VIEW name(LIKE other)` (the columns documented for `other`), `TABLE name PARTITION OF parent`
    and `SEQUENCE name`. Types are compared as the server names them (`int` is `integer`).
  * docs/src/settings.md: the rows of its settings table, `| `pg_jobqueue.name` | type | unit |
    default | range | context | preload only | meaning |` (the header names the columns). The
    table is generated from the server, between its markers, by

        tests/readme/reference.py --write-settings

    which keeps each row's meaning (a new setting gets pg_settings.short_desc, to be edited). To
    tell which settings exist only with the library preloaded, it starts a second server without
    preload and runs CREATE EXTENSION there.

It fails, naming each, on: an object or setting of the extension that is not documented (unless
ALLOWED below says why it need not be); a documented function, table, view, type or setting that
does not exist; a function whose arguments (names, types, which have a DEFAULT and its value) or
result differ from the catalog's; a table or view whose columns (names and types) differ; an enum
whose labels differ; a setting row whose type, unit, default, range, context or preload-only
cell is not the server's, whose meaning is empty, or whose columns are not those of the table; an object of a kind
this test does not know; a name in ALLOWED that no longer exists, or that a role may now call. Each
object is counted once, as passed or failed.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the tests
sys.path.insert(0, str(Path(__file__).resolve().parent))
import check  # noqa: E402  (start_server, PSQL, ROOT: the docs test's throwaway server)

ROOT = check.ROOT
DOCS = ROOT / "docs/src"

# Objects the reference rightly does not describe one by one, each with the reason. Keep it short:
# anything a role may call or read belongs in the reference. Each name must still exist, and a
# function here must stay callable by the extension's owner alone (this test checks both).
ALLOWED = {
    # The argument checks of jq_grant and jq_revoke, an internal step of those two (whose errors
    # functions.md describes); no role is granted it.
    "jq_check_grant_arguments": "an internal step of jq_grant and jq_revoke",
    # Gives a role EXECUTE on exactly the functions its rights call for; jq_grant and jq_revoke run
    # it, and jq_privilege_functions (documented) shows what it grants. No role is granted it.
    "jq_sync_function_rights": "an internal step of jq_grant and jq_revoke",
    # Gives a role USAGE on the extension's schema with its first right and takes back with its
    # last what it gave (functions.md, "Internal functions"); jq_sync_function_rights runs it.
    "jq_sync_schema_usage": "an internal step of jq_grant and jq_revoke",
    # The bounds check of jq_queues' interval settings in their CHECK constraints (the rule is in
    # tables-and-views.md: no negative part, at most 100 years). No role is granted it.
    "jq_setting_interval_ok": "a CHECK constraint's helper of jq_queues",
    # The statement trigger function on jq_queues, jq_queue_ids and jq_grants that tells every
    # session at commit to forget what it cached (functions.md, jq_configure). PostgreSQL runs it
    # only as a trigger.
    "jq_table_changed": "a trigger function",
}

CATALOG = r"""
WITH members AS (
    SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'pg_jobqueue'
)
SELECT json_build_object(
    'functions', (SELECT coalesce(json_agg(json_build_object(
            'name', p.proname,
            'identity', pg_get_function_identity_arguments(p.oid),
            'arguments', pg_get_function_arguments(p.oid),
            'result', pg_get_function_result(p.oid),
            -- Whether a role other than the owner may call it now, or gets it with a right.
            'granted', EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee <> p.proowner)
                       OR EXISTS (SELECT FROM jq_privilege_functions() f WHERE f.function_name = p.proname))
            ORDER BY p.proname), '[]')
        FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid),
    'relations', (SELECT coalesce(json_agg(json_build_object(
            'name', c.relname,
            'kind', c.relkind,
            'parent', (SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = c.oid),
            'columns', (SELECT coalesce(json_agg(json_build_array(a.attname, format_type(a.atttypid, a.atttypmod))
                                                 ORDER BY a.attnum), '[]')
                        FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
            ORDER BY c.relname), '[]')
        FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid),
    'types', (SELECT coalesce(json_agg(json_build_object(
            'name', t.typname,
            'kind', t.typtype,
            'labels', (SELECT json_agg(e.enumlabel ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid))
            ORDER BY t.typname), '[]')
        FROM members m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid),
    'event_triggers', (SELECT coalesce(json_agg(json_build_object(
            'name', e.evtname, 'event', e.evtevent, 'function', e.evtfoid::regproc::text)), '[]')
        FROM members m JOIN pg_event_trigger e ON m.classid = 'pg_event_trigger'::regclass AND e.oid = m.objid),
    'operators', (SELECT coalesce(json_agg(json_build_object(
            'name', o.oprname, 'left', format_type(o.oprleft, NULL), 'right', format_type(o.oprright, NULL),
            'function', o.oprcode::text) ORDER BY o.oprname), '[]')
        FROM members m JOIN pg_operator o ON m.classid = 'pg_operator'::regclass AND o.oid = m.objid),
    'opclasses', (SELECT coalesce(json_agg(json_build_object(
            'name', c.opcname, 'default', c.opcdefault, 'type', format_type(c.opcintype, NULL), 'method', a.amname)
            ORDER BY c.opcname), '[]')
        FROM members m JOIN pg_opclass c ON m.classid = 'pg_opclass'::regclass AND c.oid = m.objid
        JOIN pg_am a ON a.oid = c.opcmethod),
    -- An operator family made by CREATE OPERATOR CLASS for itself (same name, method and
    -- members) is the class's; any other is a kind this test does not know.
    'other', (SELECT coalesce(json_agg(pg_describe_object(m.classid, m.objid, 0)), '[]') FROM members m
        WHERE m.classid NOT IN ('pg_proc'::regclass, 'pg_class'::regclass, 'pg_type'::regclass,
                                'pg_event_trigger'::regclass, 'pg_operator'::regclass, 'pg_opclass'::regclass)
          AND NOT (m.classid = 'pg_opfamily'::regclass AND EXISTS (
                SELECT FROM pg_opfamily f JOIN pg_opclass c ON c.opcfamily = f.oid
                WHERE f.oid = m.objid AND c.opcname = f.opfname AND c.opcmethod = f.opfmethod))),
    'settings', (<SETTINGS>)
)
"""

# Every setting of the library as pg_settings gives it; `shown` is its value as SHOW prints it
# (with its unit), which on the throwaway server is its default.
SETTINGS = r"""
SELECT coalesce(json_agg(json_build_object(
        'name', s.name, 'vartype', s.vartype, 'unit', s.unit, 'setting', s.setting, 'boot_val', s.boot_val,
        'shown', current_setting(s.name), 'min_val', s.min_val, 'max_val', s.max_val, 'enumvals', s.enumvals,
        'context', s.context, 'short_desc', s.short_desc) ORDER BY s.name), '[]')
    FROM pg_settings s WHERE s.name LIKE 'pg\_jobqueue.%'
"""
CATALOG = CATALOG.replace("<SETTINGS>", SETTINGS.strip())


def psql(port, sql):
    done = subprocess.run(
        [check.PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port),
         "-U", "postgres", "-d", "postgres"],
        input=sql, capture_output=True, text=True, env={**os.environ, "PGOPTIONS": "-c lc_messages=C"},
    )
    if done.returncode != 0:
        raise SystemExit(f"psql failed:\n{done.stderr}")
    return done.stdout


# ---- reading the docs ----------------------------------------------------------------------------

FENCE = re.compile(r"^( *)```(\S*)\n(.*?)^\1```[ \t]*$", re.M | re.S)


def text_blocks(path):
    """(line, dedented body) of every ```text block of a chapter."""
    source = path.read_text()
    for block in FENCE.finditer(source):
        if block.group(2) == "text":
            yield source[: block.start()].count("\n") + 1, textwrap.dedent(block.group(3))


def statements(body, line):
    """The statements of a block: each starts at the left margin, goes on over indented lines, and
    loses its `-- comments`. (line, text) each."""
    found = []
    for offset, raw in enumerate(body.splitlines()):
        text = re.sub(r"\s*--.*$", "", raw).rstrip()
        if not text.strip():
            continue
        if text[0].isspace() and found:
            found[-1][1] += " " + text.strip()
        else:
            found.append([line + 1 + offset, text.strip()])
    return [(n, re.sub(r"\s+", " ", s)) for n, s in found]


def split_top(text):
    """Splits at the commas outside parentheses and quotes."""
    parts, depth, quoted, current = [], 0, False, ""
    for ch in text:
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def parenthesized(text, start):
    """The text inside the parenthesis that opens at `start`, and the index after it closes."""
    depth, quoted = 0, False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    raise ValueError("unbalanced parentheses")


def parse_argument(text):
    """`name type [DEFAULT value]` as (name, type, default or None)."""
    match = re.fullmatch(r'"?(\w+)"?\s+(.+?)(?:\s+DEFAULT\s+(.+))?', text.strip(), re.S)
    if not match:
        raise ValueError(f"not `name type [DEFAULT value]`: {text}")
    return match.group(1), match.group(2).strip(), match.group(3)


def parse_result(text):
    """`TABLE(col type, ...)`, `SETOF type` or `type`, as ('table', [(col, type)]) or (kind, type)."""
    text = text.strip()
    table = re.match(r"TABLE\s*\(", text, re.I)
    if table:
        inside, _ = parenthesized(text, table.end() - 1)
        return "table", [parse_argument(column)[:2] for column in split_top(inside)]
    setof = re.fullmatch(r"SETOF\s+(.+)", text, re.I)
    if setof:
        return "setof", setof.group(1).strip()
    return "scalar", text


def documented_statements(path):
    """(FILE:LINE, statement) of each statement of the ```text blocks of a reference chapter."""
    for line, body in text_blocks(path):
        for number, text in statements(body, line):
            yield f"{path.relative_to(ROOT)}:{number}", text


def documented_functions():
    """functions.md: {name: [entry]} of signatures, and [entry] of event triggers."""
    path = DOCS / "functions.md"
    functions, triggers = {}, []
    for where, text in documented_statements(path):
        trigger = re.fullmatch(r"EVENT TRIGGER (\w+) ON (\w+) EXECUTE FUNCTION (\w+)\(\)", text)
        if trigger:
            triggers.append({"where": where, "name": trigger.group(1), "event": trigger.group(2),
                             "function": trigger.group(3)})
            continue
        match = re.match(r"(jq_\w+)\s*\(", text)
        try:
            if not match:
                raise ValueError("not a signature")
            inside, after = parenthesized(text, match.end() - 1)
            returns = re.fullmatch(r"\s*RETURNS\s+(.+)", text[after:], re.S)
            if not returns:
                raise ValueError("no RETURNS")
            entry = {"where": where, "text": text, "arguments": [parse_argument(a) for a in split_top(inside)],
                     "result": parse_result(returns.group(1))}
        except ValueError as error:
            raise SystemExit(f"{where}: {error}: {text}")
        functions.setdefault(match.group(1), []).append(entry)
    return functions, triggers


def documented_objects():
    """tables-and-views.md: {name: entry} of types, tables, views and sequences."""
    path = DOCS / "tables-and-views.md"
    objects, duplicates = {}, []
    for where, text in documented_statements(path):
        enum = re.fullmatch(r"TYPE (\w+) AS ENUM \((.*)\)", text)
        partition = re.fullmatch(r"TABLE (\w+) PARTITION OF (\w+)", text)
        sequence = re.fullmatch(r"SEQUENCE (\w+)", text)
        operator = re.fullmatch(r"OPERATOR (\S+?)\((\w+), (\w+)\) FUNCTION (\w+)", text)
        opclass = re.fullmatch(r"OPERATOR CLASS (\w+) (DEFAULT )?FOR TYPE (\w+) USING (\w+)", text)
        relation = re.match(r"(TABLE|VIEW) (\w+)\s*\(", text)
        if enum:
            entry = {"kind": "type", "name": enum.group(1),
                     "labels": [label.strip().strip("'") for label in split_top(enum.group(2))]}
        elif partition:
            entry = {"kind": "partition", "name": partition.group(1), "parent": partition.group(2)}
        elif sequence:
            entry = {"kind": "sequence", "name": sequence.group(1)}
        elif operator:
            entry = {"kind": "operator", "name": f"{operator.group(1)}({operator.group(2)}, {operator.group(3)})",
                     "function": operator.group(4)}
        elif opclass:
            entry = {"kind": "operator class", "name": opclass.group(1), "default": bool(opclass.group(2)),
                     "type": opclass.group(3), "method": opclass.group(4)}
        elif relation:
            try:
                inside, after = parenthesized(text, relation.end() - 1)
                if text[after:].strip():
                    raise ValueError("text after the columns")
                columns = [] if inside.strip().startswith("LIKE ") else [
                    parse_argument(c)[:2] for c in split_top(inside)]
            except ValueError as error:
                raise SystemExit(f"{where}: {error}: {text}")
            like = re.fullmatch(r"LIKE (\w+)", inside.strip())
            entry = {"kind": relation.group(1).lower(), "name": relation.group(2),
                     "like": like.group(1) if like else None, "columns": [] if like else columns}
        else:
            raise SystemExit(f"{where}: not TYPE, TABLE, VIEW, SEQUENCE, OPERATOR or OPERATOR CLASS: {text}")
        entry["where"] = where
        if entry["name"] in objects:
            duplicates.append(entry)
        objects[entry["name"]] = entry
    # `VIEW name(LIKE other)`: the columns documented for `other`.
    for entry in objects.values():
        if entry.get("like"):
            other = objects.get(entry["like"])
            if not other or other.get("like") or "columns" not in other:
                raise SystemExit(f"{entry['where']}: LIKE {entry['like']}, which is documented with no columns")
            entry["columns"] = other["columns"]
    return objects, duplicates


SETTINGS_FILE = DOCS / "settings.md"
SETTINGS_BEGIN = "<!-- settings table: generated by tests/readme/reference.py --write-settings; checked against the server -->"
SETTINGS_END = "<!-- end of settings table -->"
SETTING_COLUMNS = ["setting", "type", "unit", "default", "range", "context", "preload only", "meaning"]
# pg_settings.context in plain words: who may change a setting, and when a change applies.
CONTEXTS = {
    "postmaster": "restart",
    "sighup": "reload",
    "superuser": "superuser, per session",
    "user": "any role, per session",
}
# The order of the table: the limits first, what any role may set, then the configuration file's.
CONTEXT_ORDER = ["superuser", "user", "sighup", "postmaster"]


def cells(row):
    """The cells of a table row, split at the pipes that are not escaped."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def documented_settings():
    """settings.md: {name: [(where, {column: cell})]} of the rows of its settings tables, and the
    problems of their form (a table whose columns are not SETTING_COLUMNS, a row of too few cells)."""
    found, problems, header = {}, [], None
    for number, line in enumerate(SETTINGS_FILE.read_text().splitlines(), 1):
        where = f"{SETTINGS_FILE.relative_to(ROOT)}:{number}"
        if not line.startswith("|"):
            header = None
            continue
        row = cells(line)
        if header is None:
            header = row
            if row and row[0] == "setting" and row != SETTING_COLUMNS:
                problems.append(f"{where}: the settings table has the columns {row}, not {SETTING_COLUMNS}")
            continue
        name = re.fullmatch(r"`(pg_jobqueue\.\w+)`", row[0])
        if not name:
            continue
        if len(row) != len(header):
            problems.append(f"{where}: a row of {len(row)} cells under the columns {header}")
            continue
        found.setdefault(name.group(1), []).append((where, dict(zip(header, row))))
    return found, problems


def setting_cells(s, preload_only):
    """What the settings table says of a setting, column by column (all but its meaning)."""
    if s["vartype"] in ("integer", "real"):
        range_ = f"{s['min_val']} to {s['max_val']}"
    elif s["vartype"] == "enum":
        range_ = ", ".join(f"`{v}`" for v in s["enumvals"])
    else:
        range_ = ""
    if s["vartype"] in ("string", "enum"):
        default = f"`{s['shown']}`" if s["shown"] else "(empty)"
    else:
        default = s["shown"]
    return {
        "setting": f"`{s['name']}`",
        "type": s["vartype"],
        "unit": s["unit"] or "",
        "default": default,
        "range": range_,
        "context": f"{CONTEXTS.get(s['context'], '?')} (`{s['context']}`)",
        "preload only": "yes" if preload_only else "no",
    }


def server_settings():
    """The settings of the library (pg_settings rows), and the names of those that exist only when it
    is preloaded: a second server loads it by CREATE EXTENSION alone."""
    port, parent, data = check.start_server([])
    try:
        loaded = {s["name"] for s in json.loads(psql(port, "CREATE EXTENSION pg_jobqueue;\n" + SETTINGS))}
    finally:
        subprocess.run([ROOT / "scripts/pg.sh", "stop", data], check=False)
        shutil.rmtree(parent, ignore_errors=True)
    return loaded


def settings_table(settings, loaded, documented):
    """The settings table's markdown: each documented row's meaning kept, a new one's from short_desc."""
    order = {name: i for i, name in enumerate(documented)}
    rows = sorted(settings, key=lambda s: (CONTEXT_ORDER.index(s["context"]) if s["context"] in CONTEXT_ORDER
                                           else len(CONTEXT_ORDER), order.get(s["name"], len(order)), s["name"]))
    lines = ["| " + " | ".join(SETTING_COLUMNS) + " |", "|" + "---|" * len(SETTING_COLUMNS)]
    for s in rows:
        said = documented.get(s["name"])
        meaning = said[0][1].get("meaning") if said else None
        meaning = meaning or s["short_desc"]
        row = setting_cells(s, s["name"] not in loaded)
        row["meaning"] = meaning
        lines.append("| " + " | ".join(row[c].replace("|", "\\|") for c in SETTING_COLUMNS) + " |")
    return "\n".join(lines)


def write_settings():
    """Rewrites the settings table of settings.md between its markers, from the server."""
    text = SETTINGS_FILE.read_text()
    if text.count(SETTINGS_BEGIN) != 1 or text.count(SETTINGS_END) != 1:
        raise SystemExit(f"{SETTINGS_FILE.relative_to(ROOT)}: needs the markers\n{SETTINGS_BEGIN}\n{SETTINGS_END}")
    documented, problems = documented_settings()
    port, parent, data = check.start_server(["pg_jobqueue"])
    try:
        settings = json.loads(psql(port, "CREATE EXTENSION pg_jobqueue;\n" + SETTINGS))
    finally:
        subprocess.run([ROOT / "scripts/pg.sh", "stop", data], check=False)
        shutil.rmtree(parent, ignore_errors=True)
    table = settings_table(settings, server_settings(), documented)
    before, rest = text.split(SETTINGS_BEGIN)
    _, after = rest.split(SETTINGS_END)
    SETTINGS_FILE.write_text(before + SETTINGS_BEGIN + "\n\n" + table + "\n\n" + SETTINGS_END + after)
    print(f"{SETTINGS_FILE.relative_to(ROOT)}: {len(settings)} settings written")
    return 0


# ---- comparing -----------------------------------------------------------------------------------

class Types:
    """Canonical type names (format_type of to_regtype), asked of the server in one go."""

    def __init__(self, port, names):
        names = sorted(set(names))
        literal = "ARRAY[" + ", ".join("'" + n.replace("'", "''") + "'" for n in names) + "]::text[]"
        rows = psql(port, f"SELECT json_object_agg(t, format_type(to_regtype(t), NULL)) FROM unnest({literal}) t")
        self.canonical = json.loads(rows) if names else {}

    def __call__(self, name):
        return self.canonical.get(name) or f"<unknown type {name}>"


def default_value(text):
    """A DEFAULT as compared: without casts, spaces and case."""
    if text is None:
        return None
    text = re.sub(r"::[a-z_ ]+(\[\])?", "", text.strip())
    return re.sub(r"\s+", "", text).lower()


def result_text(result, types):
    kind, value = result
    if kind == "table":
        return "TABLE(" + ", ".join(f"{n} {types(t)}" for n, t in value) + ")"
    return ("SETOF " if kind == "setof" else "") + types(value)


def arguments_text(arguments, types):
    return ", ".join(f"{n} {types(t)}" + (f" DEFAULT {default_value(d)}" if d is not None else "")
                     for n, t, d in arguments)


def compare_function(catalog, doc, types):
    """What differs between a function and its documented signature."""
    problems = []
    have = [parse_argument(a) for a in split_top(catalog["arguments"])]
    said = doc["arguments"]
    if [(n, types(t)) for n, t, _ in have] != [(n, types(t)) for n, t, _ in said]:
        problems.append(f"arguments ({arguments_text(said, types)}), but the function has "
                        f"({arguments_text(have, types)})")
    elif [default_value(d) for _, _, d in have] != [default_value(d) for _, _, d in said]:
        problems.append(f"defaults ({arguments_text(said, types)}), but the function has "
                        f"({arguments_text(have, types)})")
    if result_text(parse_result(catalog["result"]), types) != result_text(doc["result"], types):
        problems.append(f"RETURNS {result_text(doc['result'], types)}, but the function returns "
                        f"{result_text(parse_result(catalog['result']), types)}")
    return problems


def main():
    functions, triggers = documented_functions()
    objects, duplicates = documented_objects()
    settings, settings_form = documented_settings()

    port, parent, data = check.start_server(["pg_jobqueue"])
    try:
        psql(port, "CREATE EXTENSION pg_jobqueue;")
        catalog = json.loads(psql(port, CATALOG))
        names = [t for entries in functions.values() for e in entries
                 for t in [a[1] for a in e["arguments"]]
                 + ([c[1] for c in e["result"][1]] if e["result"][0] == "table" else [e["result"][1]])]
        names += [t for o in objects.values() for _, t in o.get("columns", [])]
        for f in catalog["functions"]:
            names += [parse_argument(a)[1] for a in split_top(f["arguments"])]
            result = parse_result(f["result"])
            names += [c[1] for c in result[1]] if result[0] == "table" else [result[1]]
        names += [t for r in catalog["relations"] for _, t in r["columns"]]
        types = Types(port, names)
    finally:
        subprocess.run([ROOT / "scripts/pg.sh", "stop", data], check=False)
        shutil.rmtree(parent, ignore_errors=True)
    loaded = server_settings()

    results = []  # (what, [problems])

    # Functions, both ways: each function against the documented signature of its argument types
    # (or the only one of its name), then every signature no function took.
    by_name, used = {}, set()
    for f in catalog["functions"]:
        by_name.setdefault(f["name"], []).append(f)
    for name, entries in sorted(by_name.items()):
        for f in entries:
            what = f"function {name}({f['identity']})"
            docs = functions.get(name, [])
            argument_types = [types(parse_argument(a)[1]) for a in split_top(f["arguments"])]
            same = [d for d in docs if [types(t) for _, t, _ in d["arguments"]] == argument_types]
            doc = same[0] if same else docs[0] if len(docs) == 1 and len(entries) == 1 else None
            if name in ALLOWED:
                problems = [] if not f["granted"] else [
                    f"is allowed undocumented as {ALLOWED[name]}, yet a role other than the owner may call it: "
                    "document it in functions.md and drop it from ALLOWED"]
                if docs:
                    problems.append(f"is documented ({docs[0]['where']}) and in ALLOWED: drop it from ALLOWED")
            elif doc is None:
                problems = ["is not documented: add its signature to a ```text block of functions.md"]
            else:
                problems = [f"{doc['where']}: {p}" for p in compare_function(f, doc, types)]
            if doc is not None:
                used.add(id(doc))
            results.append((what, problems))
    for name, docs in sorted(functions.items()):
        for doc in docs:
            if id(doc) in used:
                continue
            signature = [types(t) for _, t, _ in doc["arguments"]]
            twice = any(id(d) in used and [types(t) for _, t, _ in d["arguments"]] == signature for d in docs)
            why = ("documented twice" if twice
                   else "documented, but the extension has no such function" if name not in by_name
                   else "documented, but no function of that name takes these argument types")
            results.append((f"function {name}", [f"{doc['where']}: {why}: {doc['text']}"]))

    # Event triggers.
    for trigger in catalog["event_triggers"]:
        docs = [t for t in triggers if t["name"] == trigger["name"]]
        what = f"event trigger {trigger['name']}"
        if not docs:
            problems = ["is not documented: add `EVENT TRIGGER name ON event EXECUTE FUNCTION f()` to functions.md"]
        elif (docs[0]["event"], docs[0]["function"]) != (trigger["event"], trigger["function"]):
            problems = [f"{docs[0]['where']}: ON {docs[0]['event']} EXECUTE FUNCTION {docs[0]['function']}(), "
                        f"but it is ON {trigger['event']} EXECUTE FUNCTION {trigger['function']}()"]
        else:
            problems = []
        results.append((what, problems))
    known = {t["name"] for t in catalog["event_triggers"]}
    for doc in triggers:
        if doc["name"] not in known:
            results.append((f"event trigger {doc['name']}",
                            [f"{doc['where']}: documented, but there is no such event trigger"]))

    # Types, tables, views, sequences and their columns, both ways.
    kinds = {"r": "table", "p": "table", "v": "view", "S": "sequence"}
    for t in catalog["types"]:
        doc = objects.get(t["name"])
        what = f"type {t['name']}"
        if t["kind"] != "e":
            problems = [f"is a type of kind {t['kind']}, which this test does not know: teach it"]
        elif not doc or doc["kind"] != "type":
            problems = ["is not documented: add `TYPE name AS ENUM (...)` to tables-and-views.md"]
        elif doc["labels"] != t["labels"]:
            problems = [f"{doc['where']}: labels {doc['labels']}, but the enum has {t['labels']}"]
        else:
            problems = []
        results.append((what, problems))
    for r in catalog["relations"]:
        kind = "partition" if r["parent"] else kinds.get(r["kind"])
        what = f"{kind or 'relation'} {r['name']}"
        doc = objects.get(r["name"])
        if kind is None:
            problems = [f"has relkind {r['kind']}, which this test does not know: teach it"]
        elif not doc:
            problems = ["is not documented: add it to a ```text block of tables-and-views.md"]
        elif doc["kind"] != kind:
            problems = [f"{doc['where']}: documented as a {doc['kind']}, but it is a {kind}"]
        elif kind == "partition":
            problems = [] if doc["parent"] == r["parent"] else [
                f"{doc['where']}: a partition of {doc['parent']}, but it is one of {r['parent']}"]
        elif kind == "sequence":
            problems = []
        else:
            have = {n: t for n, t in r["columns"]}
            said = {n: types(t) for n, t in doc["columns"]}
            problems = [f"{doc['where']}: column {n} {t} is not documented" for n, t in have.items() if n not in said]
            problems += [f"{doc['where']}: documents column {n}, which it does not have" for n in said if n not in have]
            problems += [f"{doc['where']}: column {n} is documented as {said[n]}, but it is {t}"
                         for n, t in have.items() if n in said and said[n] != types(t)]
        results.append((what, problems))
    for o in catalog["operators"]:
        name = f"{o['name']}({o['left']}, {o['right']})"
        doc = objects.get(name)
        if not doc or doc["kind"] != "operator":
            problems = ["is not documented: add `OPERATOR op(left, right) FUNCTION f` to tables-and-views.md"]
        elif doc["function"] != o["function"]:
            problems = [f"{doc['where']}: FUNCTION {doc['function']}, but it calls {o['function']}"]
        else:
            problems = []
        results.append((f"operator {name}", problems))
    for c in catalog["opclasses"]:
        doc = objects.get(c["name"])
        said = doc and (doc["default"], doc["type"], doc["method"])
        if not doc or doc["kind"] != "operator class":
            problems = ["is not documented: add `OPERATOR CLASS name [DEFAULT ]FOR TYPE t USING m` to tables-and-views.md"]
        elif said != (c["default"], c["type"], c["method"]):
            problems = [f"{doc['where']}: documented as {said}, but it is {(c['default'], c['type'], c['method'])}"]
        else:
            problems = []
        results.append((f"operator class {c['name']}", problems))
    existing = {t["name"] for t in catalog["types"]} | {r["name"] for r in catalog["relations"]}
    existing |= {f"{o['name']}({o['left']}, {o['right']})" for o in catalog["operators"]}
    existing |= {c["name"] for c in catalog["opclasses"]}
    for name, doc in sorted(objects.items()):
        if name not in existing:
            results.append((f"{doc['kind']} {name}",
                            [f"{doc['where']}: documented, but the extension has no such object"]))
    for doc in duplicates:
        results.append((f"{doc['kind']} {doc['name']}", [f"{doc['where']}: documented twice"]))

    # Anything else the extension holds: a kind this test does not know yet.
    for description in catalog["other"]:
        results.append((description, ["is an object of a kind this test does not check: teach it"]))

    # Settings, both ways, every column of their rows against pg_settings.
    have = {s["name"]: s for s in catalog["settings"]}
    for name, s in sorted(have.items()):
        rows = settings.get(name, [])
        if not rows:
            problems = ["is not documented: add a row to the table of settings.md "
                        "(tests/readme/reference.py --write-settings)"]
        else:
            where, said = rows[0]
            problems = [] if (s["setting"] or "") == (s["boot_val"] or "") else [
                f"the throwaway server sets it to {s['setting']}, not its default {s['boot_val']}"]
            for column, value in setting_cells(s, name not in loaded).items():
                if said.get(column) != value:
                    problems.append(f"{where}: {column} {said.get(column)!r}, but the server says {value!r}")
            if not said.get("meaning"):
                problems.append(f"{where}: no meaning")
            problems += [f"{w}: documented twice" for w, _ in rows[1:]]
        results.append((f"setting {name}", problems))
    for name, rows in sorted(settings.items()):
        if name not in have:
            results.append((f"setting {name}", [f"{rows[0][0]}: documented, but there is no such setting"]))
    if settings_form:
        results.append(("settings table", settings_form))

    # ALLOWED names that no longer exist.
    for name in sorted(ALLOWED):
        if name not in by_name:
            results.append((f"allowed {name}", ["is in ALLOWED, but the extension has no such function: drop it"]))

    failed = [(what, problems) for what, problems in results if problems]
    for what, problems in failed:
        print(f"{what}:")
        for problem in problems:
            print(f"  {problem}")
    allowed = sorted(n for n in ALLOWED if n in by_name)
    print(f"reference: {len(catalog['functions'])} functions, {len(catalog['relations'])} tables, views and "
          f"sequences, {len(catalog['types'])} types, {len(catalog['operators'])} operators, "
          f"{len(catalog['opclasses'])} operator classes, {len(catalog['event_triggers'])} event triggers, "
          f"{len(catalog['settings'])} settings; not described one by one: {', '.join(allowed) or 'none'}")
    print(f"test result: reference. {len(results) - len(failed)} passed; {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(write_settings() if sys.argv[1:] == ["--write-settings"] else main())
