#!/usr/bin/env python3
"""The import map of the extension's modules (src/), and the lint rule over it.

Every `crate::`, `super::` and `self::` path in a module's code (its tests included, comments not)
is an arrow from that module to the module the path names. The modules stand on floors, and an
arrow may only run level or down:

  5  the top: lib.rs, the background worker (reaper), upgrade
  4  api: the SQL functions
  3  shared: what backends share (shared memory, the hooks, the key locks)
  2  rights, input, error: who may call, which arguments pass, what a refusal says
  1  db: the only code that runs SQL
  0  guc, cron, testing: settings, cron expressions, what the tests share

    scripts/imports.py            prints every arrow, then the arrows that break the rule
    scripts/imports.py --check    prints only what breaks the rule; exits 1 if anything does

It fails on an arrow that runs up a floor, and on arrows that close a circle (modules that reach
each other, directly or through others), whatever their floors.
"""
import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
FLOORS = [
    (5, ["crate", "reaper", "upgrade"]),
    (4, ["api"]),
    (3, ["shared"]),
    (2, ["rights", "input", "error"]),
    (1, ["db"]),
    (0, ["guc", "cron", "testing", "version"]),
]


def module_of(path):
    parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return "::".join(parts) if parts else "crate"


def floor_of(module):
    top = module.split("::")[0]
    for floor, names in FLOORS:
        if top in names:
            return floor
    sys.exit(f"imports.py: module {module} stands on no floor; add it to FLOORS")


def modules():
    found = {}
    for directory, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                found[module_of(path)] = path
    return found


def resolve(module, path, known):
    """The module a path names, from inside `module`: the longest prefix that is a module."""
    segments = path.split("::")
    if segments[0] == "crate":
        base, segments = [], segments[1:]
    elif segments[0] in ("super", "self"):
        base = [] if module == "crate" else module.split("::")
        while segments and segments[0] in ("super", "self"):
            if segments[0] == "super":
                base = base[:-1]
            segments = segments[1:]
    else:
        return None
    names = base + segments
    for length in range(len(names), 0, -1):
        name = "::".join(names[:length])
        if name in known:
            return name
    return None


def arrows(known):
    edges = collections.defaultdict(set)
    for module, path in known.items():
        code = "\n".join(line for line in open(path) if not line.strip().startswith("//"))
        targets = []
        for group in re.finditer(r"\buse\s+((?:crate|super|self)(?:::\w+)*)::\{([^;]*)\};", code, re.S):
            for item in re.sub(r"\{[^}]*\}", "", group.group(2)).split(","):
                item = item.strip().split(" as ")[0]
                if item:
                    targets.append(group.group(1) if item == "self" else f"{group.group(1)}::{item}")
        targets += re.findall(r"\b((?:crate|super)(?:::\w+)+)", code)
        for target in targets:
            # `super::` inside a file's own `mod tests` names the file itself, which is no arrow.
            name = resolve(module, target, known)
            if name and name != module and not module.startswith(name + "::") and not name.startswith(module + "::"):
                edges[module].add(name)
    return edges


def circles(edges):
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main():
    check = "--check" in sys.argv
    known = modules()
    edges = arrows(known)
    if not check:
        for module in sorted(edges):
            print(f"{module} (floor {floor_of(module)}) -> {' '.join(sorted(edges[module]))}")
    broken = []
    for module in sorted(edges):
        for target in sorted(edges[module]):
            if floor_of(target) > floor_of(module):
                broken.append(f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)}): up a floor")
    for component in circles(edges):
        broken.append(f"a circle: {' <-> '.join(component)}")
    for line in broken:
        print(f"imports: {line}")
    if not check:
        print(f"imports: {sum(len(t) for t in edges.values())} arrows, {len(broken)} break the rule")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
