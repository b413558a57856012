"""The layout rules CONTRIBUTING and docs/architecture.md state, checked on the source itself:
small functions, no import cycle (imports inside functions included), and every package saying
what it owns and what it may import.

The module line cap is a review prompt, not a design rule: a module past it asks its reviewer
where the concept divides (split it there, by concept, never at the line where it passed). There
is no cap on how many modules a package holds: packages follow concepts, not counts."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import grimp

SRC = Path(__file__).resolve().parents[1] / "src" / "batchgate"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400  # a review prompt: past it, find where the concept divides


def _modules() -> Iterator[Path]:
    yield from sorted(SRC.rglob("*.py"))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = []
    for path in _modules():
        for fn in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                too_long.append(f"{path.relative_to(SRC)}:{fn.lineno} {fn.name} ({lines} lines)")
    assert too_long == []


def test_no_module_is_longer_than_the_limit() -> None:
    """The review prompt: a module past the cap is split where its concept divides."""
    too_long = [
        f"{path.relative_to(SRC)} ({n} lines)"
        for path in _modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert too_long == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module are import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_strongly_connected_finds_a_cycle() -> None:
    """The cycle finder itself can fail: a → b → c → a is one component, d stands alone."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _strongly_connected(graph) == [["a", "b", "c"]]


def test_there_is_no_import_cycle() -> None:
    g = grimp.build_graph("batchgate", cache_dir=None)
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    assert _strongly_connected(graph) == []


def test_every_package_says_what_it_owns_and_may_import() -> None:
    silent = []
    for init in sorted(SRC.rglob("__init__.py")):
        if init.parent == SRC:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if "May import" not in doc:
            silent.append(str(init.relative_to(SRC)))
    assert silent == []


_WALL_READS = {("time", "time"), ("time", "time_ns"), ("datetime", "now"), ("datetime", "utcnow"),
               ("datetime", "today"), ("date", "today")}  # fmt: skip


def _wall_clock_reads(tree: ast.AST) -> list[int]:
    """Lines that read the wall clock: `time.time()` / `time.time_ns()`, `datetime.now()` and kin,
    or `from time import time`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in _WALL_READS:
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "time"
            and any(alias.name in ("time", "time_ns") for alias in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_clock_reads_the_wall_clock() -> None:
    readers = [
        f"{path.relative_to(SRC)}:{line}"
        for path in _modules()
        if path.name != "clock.py" or path.parent != SRC
        for line in _wall_clock_reads(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert readers == []


def test_a_wall_clock_read_is_found() -> None:
    assert _wall_clock_reads(ast.parse("import time\nx = time.time()\n")) == [2]


_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|Users|tmp)/\w")


def _machine_paths(text: str) -> list[int]:
    """Lines citing a file by one machine's absolute path (a spec at /work/..., a home folder)."""
    return [n for n, line in enumerate(text.splitlines(), 1) if _MACHINE_PATH.search(line)]


def test_no_module_cites_a_machine_path() -> None:
    """A reader has the repository, not the maintainer's disk: a spec is cited by its name and
    section (shared/PROTOCOLS.md, "Gemini"), never by an absolute path."""
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in _modules()
        for n in _machine_paths(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_a_machine_path_is_found() -> None:
    text = '"""Rules from /work/shared/PROTOCOLS.md "Gemini"."""\nURL = "https://x.test/v1/work/a"\n'
    assert _machine_paths(text) == [1]
