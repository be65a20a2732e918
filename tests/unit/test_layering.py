"""Ratchets on the shape of the code (issue 41): each may only get better.

- No import cycles among our modules, counting imports under ``TYPE_CHECKING`` and inside
  functions: a cycle is two modules that must change together. ``KNOWN_CYCLES`` lists the
  ones the dispatcher work still has to break; it may only shrink.
- No source file over 800 lines: ``CEILINGS`` holds today's size of each longer file, which
  may only shrink (and leave the table once under 800).
- Only the stores import ``redis``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "adapters", "bot")
MAX_LINES = 800

KNOWN_CYCLES: set[frozenset[str]] = set()
"""Cycles that exist today; each must be broken, none added (a cycle that grows fails too)."""

CEILINGS: dict[str, int] = {}
"""Files over 800 lines today and their size: none may grow; each is to be split."""

REDIS_IMPORTERS = {"core/stores/redis/"}
"""Where redis may be imported: a folder (ending in ``/``) and everything under it, or one
module. Only the Redis stores do."""


def _sources() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(path: Path, name: str, tree: ast.AST) -> Iterator[str]:
    """Every module name ``path`` imports, at any depth (TYPE_CHECKING and functions too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            for alias in node.names:  # `from pkg import module` imports the module too
                yield f"{base}.{alias.name}"


def _graph() -> dict[str, set[str]]:
    trees = {_module_name(p): (p, ast.parse(p.read_text(encoding="utf-8"))) for p in _sources()}
    graph: dict[str, set[str]] = {}
    for name, (path, tree) in trees.items():
        graph[name] = {m for m in _imported(path, name, tree) if m in trees and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]


def test_no_import_cycles_beyond_the_known_ones() -> None:
    cycles = set(_cycles(_graph()))
    new = cycles - KNOWN_CYCLES
    assert not new, f"import cycles: {[sorted(c) for c in new]}"
    broken = KNOWN_CYCLES - cycles
    assert not broken, f"broken, so take them out of KNOWN_CYCLES: {[sorted(c) for c in broken]}"


def test_no_file_over_800_lines_and_none_grows() -> None:
    problems = []
    for path in _sources():
        relative = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        ceiling = CEILINGS.get(relative, MAX_LINES)
        if lines > ceiling:
            problems.append(f"{relative}: {lines} lines (at most {ceiling})")
    assert not problems, "; ".join(problems)


def test_ceilings_are_current() -> None:
    """A file that shrank lowers its ceiling (so the room is not spent again)."""
    stale = []
    for relative, ceiling in CEILINGS.items():
        path = ROOT / relative
        lines = len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0
        if lines < ceiling:
            stale.append(f"{relative}: {lines} lines, ceiling {ceiling}")
    assert not stale, "lower these ceilings (or drop them under 800): " + "; ".join(stale)


def test_only_the_stores_import_redis() -> None:
    importers = set()
    for path in _sources():
        name = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(m == "redis" or m.startswith("redis.") for m in _imported(path, name, tree)):
            importers.add(path.relative_to(ROOT).as_posix())
    allowed = {i for i in importers if any(_under(i, place) for place in REDIS_IMPORTERS)}
    assert importers == allowed, f"redis imported outside the stores: {sorted(importers - allowed)}"
    for place in REDIS_IMPORTERS:  # a stale entry would let redis in unnoticed later
        assert any(_under(i, place) for i in importers), f"nothing in {place} imports redis"


def _under(relative: str, place: str) -> bool:
    return relative.startswith(place) if place.endswith("/") else relative == place


def test_discords_buttons_find_the_cog_by_its_name() -> None:
    """``adapters.discord.buttons`` finds the cog by name (it may not import it): the name
    must stay the cog's, and the cog must answer every press."""
    from adapters.discord.buttons import COG_NAME, Presses
    from adapters.discord.cog import AskCog

    assert AskCog.__cog_name__ == COG_NAME
    presses = [n for n in vars(Presses) if n.endswith(("_pressed", "_submitted"))]
    assert len(presses) == 7
    assert all(callable(getattr(AskCog, name, None)) for name in presses)
