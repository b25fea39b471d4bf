"""The code's layout rules, checked: small files (at most 300 lines outside tests and benchmarks), lines of at
most 110 columns (ruff's E501, as pyproject.toml configures it), no import circle of more than 3 modules
(type-only imports counted: a reader follows those too), and the messages between processes built by
keyword."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("minisgl", "tracer", "tui", "course")


def sources(packages=PACKAGES) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def test_no_file_over_300_lines():
    long = [f"{p.relative_to(ROOT)}: {n}" for p in sources()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 300]
    assert not long, "split these by concern:\n" + "\n".join(long)


def test_no_line_over_110_columns():
    pytest.importorskip("ruff", reason="ruff is not installed (make test installs it)")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "E501",
                           *PACKAGES], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def module_imports(path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports at its top level, `if TYPE_CHECKING:` blocks included (an import
    inside a function runs only when called: a reader sees it where it is used)."""

    def top(body):
        for node in body:
            if isinstance(node, (ast.If, ast.Try)):
                yield from top(node.body)
                yield from top(node.orelse)
                for handler in getattr(node, "handlers", []):
                    yield from top(handler.body)
            else:
                yield node

    out = set()
    for node in top(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n in known}
    return out


def import_circles(packages=("minisgl", "tracer")) -> list[list[str]]:
    """The strongly connected groups of the import graph (Tarjan's algorithm), largest first."""
    paths = {}
    for p in sources(packages):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        paths[name.removesuffix(".__init__")] = p
    graph = {m: module_imports(p, set(paths)) - {m} for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups, key=len, reverse=True)


def test_no_import_circle_of_more_than_three_modules():
    big = [group for group in import_circles() if len(group) > 3]
    assert not big, "\n".join(f"{len(g)} modules import each other: {', '.join(g)}" for g in big)


def test_the_check_finds_a_small_circle_it_allows():
    pair = ["minisgl.model_executor.cpu_graph_runner", "minisgl.model_executor.model_runner"]
    assert pair in import_circles(("minisgl",))  # the runner records its graph; the graph replays the runner


def test_messages_between_processes_are_built_by_keyword():
    from minisgl.disaggregation import kv_transfer
    from minisgl.scheduler import io_struct, utils

    records = [obj for module in (io_struct, utils, kv_transfer) for _, obj in inspect.getmembers(module)
               if dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__]
    assert len(records) >= 12
    positional = [f"{r.__name__}.{f.name}" for r in records for f in dataclasses.fields(r) if not f.kw_only]
    assert not positional, positional
