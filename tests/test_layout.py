"""The layout's import rules, checked on the code's own imports (run-time imports only:
names imported under ``if TYPE_CHECKING:`` are for the type checker).

- consumer/archive (the archive format) imports the standard library and
  consumer.sequence only, so Spark executors and any reader can take it alone;
- the daemon library (consumer, except consumer/cli) never imports the operator
  layer (consumer/cli), the Spark jobs, the benchmarks or the tests;
- the processor contract imports nothing of the worker: only records and sequences;
- the reading side, the leases and the archive format do not import the lifecycle
  or the lander that use them;
- sparkjobs imports of consumer only the archive format, settings and errors,
  sequences and logging;
- nothing but the tests imports the tests.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("consumer", "sparkjobs", "bench")


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module a file imports at run time (``from a import b`` gives a and a.b)."""
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
            if name == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)

    Visitor().visit(ast.parse(path.read_text()))
    return found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "node_modules" not in path.parts:
                graph[_module(path)] = _imports(path)
    return graph


GRAPH = _graph()


def _within(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _offending(module_prefix: str, allowed: Callable[[str, str], bool]) -> dict[str, list[str]]:
    bad: dict[str, list[str]] = {}
    for module, imported in GRAPH.items():
        if not _within(module, module_prefix):
            continue
        wrong = sorted(name for name in imported if not allowed(module, name))
        if wrong:
            bad[module] = wrong
    return bad


def test_the_graph_is_read() -> None:
    """The checker sees the code (a rule over an empty graph would pass vacuously)."""
    assert "consumer.lifecycle.worker" in GRAPH
    assert "consumer.leases.board_coordinator" in GRAPH["consumer.lifecycle.worker"]


def test_the_archive_format_stands_alone() -> None:
    """consumer/archive imports the standard library and consumer.sequence only."""

    def allowed(_: str, name: str) -> bool:
        top = name.split(".", maxsplit=1)[0]
        return top in sys.stdlib_module_names or _within(
            name, "consumer.archive", "consumer.sequence", "__future__"
        )

    assert _offending("consumer.archive", allowed) == {}


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("consumer", ("consumer.cli", "sparkjobs", "bench", "tests")),
        ("consumer.stream", ("consumer.lifecycle", "consumer.landing")),
        ("consumer.leases", ("consumer.lifecycle", "consumer.landing", "consumer.stream")),
        ("consumer.archive", ("consumer.lifecycle", "consumer.landing", "consumer.leases")),
        ("sparkjobs", ("tests", "bench")),
        ("bench", ("tests",)),
    ],
)
def test_no_import_against_the_layers(package: str, forbidden: tuple[str, ...]) -> None:
    """A package never imports what stands above it (the daemon library never the
    operator layer; the reading side never the lifecycle; nothing the tests)."""

    def allowed(module: str, name: str) -> bool:
        if package == "consumer" and _within(module, "consumer.cli"):
            return True  # the operator layer may use everything below it
        return not _within(name, *forbidden)

    assert _offending(package, allowed) == {}


def test_the_processor_contract_imports_nothing_of_the_worker() -> None:
    """A processor and its tests need only the contract, records and sequences."""
    project = {
        name
        for name in GRAPH["consumer.lifecycle.processor"]
        if name.split(".")[0] in {"consumer", "sparkjobs"}
    }
    assert project <= {
        "consumer.stream.records",
        "consumer.stream.records.Record",
        "consumer.sequence",
        "consumer.sequence.Checkpoint",
        "consumer.sequence.Position",
    }, project


def test_sparkjobs_take_only_the_format_settings_and_logging_from_consumer() -> None:
    """The Spark jobs import, of the daemon's package, the archive format, settings (the
    environment's and LANDER_STREAMS_FILE's) and errors, sequences and logging: nothing
    that reads streams or holds leases."""

    def allowed(_: str, name: str) -> bool:
        return not _within(name, "consumer") or _within(
            name,
            "consumer.archive",
            "consumer.config",
            "consumer.streams_file",
            "consumer.errors",
            "consumer.sequence",
            "consumer.telemetry",
        )

    assert _offending("sparkjobs", allowed) == {}
