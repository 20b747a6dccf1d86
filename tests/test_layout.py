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
- nothing but the tests imports the tests;
- no two modules of the daemon import each other, even through a chain and even for
  types only: each part names what it uses, below it.
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


def _imports(path: Path, *, for_types: bool = False) -> set[str]:
    """Every module a file imports at run time (``from a import b`` gives a and a.b),
    and with ``for_types`` those imported for the type checker too."""
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", "")
            if name == "TYPE_CHECKING" and not for_types:
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


def _graph(*, for_types: bool = False) -> dict[str, set[str]]:
    graph = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "node_modules" not in path.parts:
                graph[_module(path)] = _imports(path, for_types=for_types)
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


SHARED_AT_THE_ROOT = {
    "aio": "asyncio helpers every loop uses",
    "aws": "the clients, their retry policy and error codes",
    "compiled": "the hot-path modules a wheel compiles, across three packages",
    "errors": "the one error tree",
    "metrics": "the worker's Prometheus series, set by every layer",
    "sequence": "sequence numbers and checkpoints, in every record and lease",
    "telemetry": "structured logging",
}


def test_the_root_of_consumer_holds_only_shared_pieces() -> None:
    """A module at consumer/'s root is one every layer shares; anything serving one
    package lives in it (issue 45: the response parsers moved to stream/, the
    start-up checks and the health server to lifecycle/)."""
    root = {path.stem for path in (REPO / "consumer").glob("*.py") if path.stem != "__init__"}
    assert root == set(SHARED_AT_THE_ROOT)


CODEC_SPELLINGS = (".jsonl.gz", "jsonl\\.gz", "\\x1f\\x8b", "application/gzip")
"""How the landed objects' codec (consumer/archive/codec.py) is spelled out."""
INDEPENDENT_ORACLES = {
    "bench/prodlike.py": "writes a production-like archive with none of the project's code",
    "bench/prodlike_truth.py": "reads that archive with none of the project's code",
}


def _spelling_the_codec() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for package in (*PACKAGES, "deploy"):
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if "node_modules" in path.parts or rel in INDEPENDENT_ORACLES:
                continue
            if rel.startswith("consumer/archive/"):
                continue
            text = path.read_text()
            hits = [spelling for spelling in CODEC_SPELLINGS if spelling in text]
            if hits:
                found[rel] = hits
    return found


def test_only_the_archive_spells_the_codec() -> None:
    """The suffix, the globs, the magic bytes and the content type of landed objects
    come from consumer/archive/codec.py (issue 45): another codec is a change there,
    not a search through the tree. Two benchmark modules spell the format on purpose:
    they are an independent writer and reader, the check on the project's own."""
    assert _spelling_the_codec() == {}
    codec = (REPO / "consumer/archive/codec.py").read_text()
    assert all(spelling in codec for spelling in CODEC_SPELLINGS[::2])
    assert all((REPO / path).is_file() for path in INDEPENDENT_ORACLES)


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


READERS = (
    "consumer.stream.reader",
    "consumer.stream.subscriber",
    "consumer.stream.fanout",
    "consumer.stream.kinesis_fanout",
    "consumer.stream.memory_fanout",
    "consumer.stream.polling",
)
"""The modules that read a shard, of every mode."""


def test_the_lifecycle_reads_through_the_reader_seam() -> None:
    """lifecycle/ reads shards through consumer.stream.readers (a factory per read
    mode, one Protocol): it imports no reader of a mode, so a new mode changes
    nothing there."""
    concrete = (*READERS, "consumer.stream.efo")
    found = {
        module: sorted(name for name in imported if _within(name, *concrete))
        for module, imported in _graph(for_types=True).items()
        if _within(module, "consumer.lifecycle")
    }
    assert {module: names for module, names in found.items() if names} == {}
    assert "consumer.stream.readers" in GRAPH["consumer.lifecycle.shard_consumer"]
    assert "consumer.stream.modes" in GRAPH["consumer.lifecycle.assembly"]


STORES_AND_READERS = (
    "consumer.leases.dynamo",
    "consumer.leases.dynamo_board",
    "consumer.leases.dynamo_table",
    "consumer.leases.memory",
    "consumer.leases.store",
    "consumer.leases.coordinator",
    "consumer.leases.board_coordinator",
    "consumer.stream.kinesis",
    "consumer.stream.memory",
    *READERS,
    "consumer.landing.lander",
    "consumer.landing.s3",
    "consumer.landing.files",
)
"""What the daemon is built of: the operator layer gets it through the assembly."""


def test_the_operator_layer_reaches_the_daemon_through_the_assembly() -> None:
    """cli/ parses arguments, calls consumer.lifecycle.assembly (which builds the
    streams, stores, readers and the worker from settings) and maps its errors to exit
    codes: it imports no store, reader or part of the lifecycle itself (issue 45). It
    may read the lease model and keys (to render them) and the efo mode's own module
    (``lander efo`` describes and deregisters its consumer)."""

    def allowed(_: str, name: str) -> bool:
        if _within(name, "consumer.lifecycle"):
            return _within(name, "consumer.lifecycle.assembly")
        return not _within(name, *STORES_AND_READERS)

    assert _offending("consumer.cli", allowed) == {}
    assert any(
        "consumer.lifecycle.assembly" in GRAPH[m] for m in GRAPH if m.startswith("consumer.cli")
    )


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
            "consumer.errors",
            "consumer.sequence",
            "consumer.telemetry",
        )

    assert _offending("sparkjobs", allowed) == {}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for name in sorted(graph[module]):
            if name not in graph:
                continue
            if name not in index:
                visit(name)
                low[module] = min(low[module], low[name])
            elif name in on_stack:
                low[module] = min(low[module], index[name])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_in_the_daemon() -> None:
    """No module of consumer/ reaches, through its imports (type-only ones included),
    back to itself: a part that needs its owner's fields names it, and then the two
    change together (issue 44: leader, hand-offs and reports over the coordinator)."""
    graph = {
        module: {name for name in imported if _within(name, "consumer")}
        for module, imported in _graph(for_types=True).items()
        if _within(module, "consumer")
    }
    assert _cycles(graph) == []


def test_a_cycle_is_found() -> None:
    """The cycle check finds one through a chain (it would pass vacuously otherwise)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# sparkjobs by concern (issue 45): the compaction, the table it publishes to, the
# analysis that reads it, and at the root what every job shares. Each rule below is a
# function of an import graph, checked on the code's (type-only imports included: a
# type names what a module depends on as much as a call does) and on a graph made to
# break it, so that none passes vacuously.

SPARK_GRAPH = {m: names for m, names in _graph(for_types=True).items() if _within(m, "sparkjobs")}

SPARK_PACKAGES = ("sparkjobs.compaction", "sparkjobs.table", "sparkjobs.analysis")

SHARED_BY_THE_JOBS = {
    "__main__": "python -m sparkjobs",
    "cli": "the entry point: parses, runs each job, maps its errors to exit codes",
    "helptext": "every command's help and exit codes",
    "settings": "every job's settings",
    "session": "the Spark session every Spark job runs in",
    "io": "filesystems and URIs: the archive, the output, the reports",
    "window": "windows and hour labels: what compact and analyse take, how the table "
    "names hours; LANDER_WINDOW's check in settings",
    "catalog": "which catalog and table: every command opens one; LANDER_TABLE's check in settings",
}

ROOT_MAY_IMPORT = {
    "sparkjobs.session": ("sparkjobs.compaction.objectreader",),
}
"""A shared module's imports of a subpackage. Every local session carries the object
reader's jar (a session is started before anyone knows which job it serves, and the
demo runs compaction and analysis in one), so session.py asks the compaction where the
jar is."""


def _spark_breaches(
    graph: dict[str, set[str]],
    applies: Callable[[str], bool],
    allowed: Callable[[str, str], bool],
) -> dict[str, list[str]]:
    """The modules ``applies`` selects, each with the sparkjobs modules it imports that
    ``allowed`` refuses."""
    found: dict[str, list[str]] = {}
    for module, imported in graph.items():
        if not applies(module):
            continue
        wrong = sorted(n for n in imported if _within(n, "sparkjobs") and not allowed(module, n))
        if wrong:
            found[module] = wrong
    return found


def _table_breaches(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    return _spark_breaches(
        graph,
        lambda module: _within(module, "sparkjobs.table"),
        lambda _, name: not _within(name, "sparkjobs.compaction", "sparkjobs.analysis"),
    )


def _compaction_breaches(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    return _spark_breaches(
        graph,
        lambda module: _within(module, "sparkjobs.compaction"),
        lambda _, name: not _within(name, "sparkjobs.analysis"),
    )


def _analysis_breaches(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    return _spark_breaches(
        graph,
        lambda module: _within(module, "sparkjobs.analysis"),
        lambda _, name: (
            not _within(name, "sparkjobs.compaction")
            or name == "sparkjobs.compaction"
            or _within(name, "sparkjobs.compaction.lines")
        ),
    )


def _shared_root(module: str) -> bool:
    """A module at sparkjobs/'s root but the entry points (cli.py, __main__.py)."""
    parts = module.split(".")
    return parts[0] == "sparkjobs" and len(parts) == 2 and parts[1] not in {"cli", "__main__"}


def _root_breaches(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    return _spark_breaches(
        graph,
        _shared_root,
        lambda module, name: (
            not _within(name, *SPARK_PACKAGES) or _within(name, *ROOT_MAY_IMPORT.get(module, ()))
        ),
    )


def test_the_root_of_sparkjobs_holds_only_what_every_job_shares() -> None:
    """sparkjobs/ holds the three concerns as packages and, at its root, only modules
    every job shares (:data:`SHARED_BY_THE_JOBS` says why each); a module serving one
    concern lives in its package."""
    root = {path.stem for path in (REPO / "sparkjobs").glob("*.py") if path.stem != "__init__"}
    packages = {path.parent.name for path in (REPO / "sparkjobs").glob("*/__init__.py")}
    assert root == set(SHARED_BY_THE_JOBS)
    assert {f"sparkjobs.{name}" for name in packages} == set(SPARK_PACKAGES)


def test_the_table_imports_neither_the_compaction_nor_the_analysis() -> None:
    """sparkjobs.table (the Iceberg table, what each hour was made from, the run
    manifests, maintenance, the raw table) is what the compaction writes and the
    analysis reads: it imports neither, so `lander maintain`, `migrate-pointers` and
    `raw-table` load no part of either and a change to them cannot break it."""
    assert "sparkjobs.table.publish" in SPARK_GRAPH["sparkjobs.table.table"]
    assert _table_breaches(SPARK_GRAPH) == {}
    bad = {"sparkjobs.table.table": {"sparkjobs.compaction.job", "sparkjobs.analysis.findings"}}
    assert _table_breaches(bad) == {
        "sparkjobs.table.table": ["sparkjobs.analysis.findings", "sparkjobs.compaction.job"]
    }


def test_the_compaction_imports_the_table_but_not_the_analysis() -> None:
    """The compaction publishes to the table (sparkjobs.table) and may import it; it
    never imports the analysis, which runs after it on what it published."""
    assert "sparkjobs.table.table" in SPARK_GRAPH["sparkjobs.compaction.compact"]
    assert _compaction_breaches(SPARK_GRAPH) == {}
    bad = {"sparkjobs.compaction.compact": {"sparkjobs.table.table", "sparkjobs.analysis.report"}}
    assert _compaction_breaches(bad) == {
        "sparkjobs.compaction.compact": ["sparkjobs.analysis.report"]
    }


def test_the_analysis_reads_the_table_not_the_compaction() -> None:
    """The analysis reads what is published (sparkjobs.table: the table, the manifests)
    and of the compaction only lines.py, so a JSON pointer into payloads is read as the
    dedupe reads it; it never imports the runner or the Spark plan, and analyses a table
    whoever compacted it."""
    assert "sparkjobs.table.compacted" in SPARK_GRAPH["sparkjobs.analysis.analyse"]
    assert _analysis_breaches(SPARK_GRAPH) == {}
    bad = {
        "sparkjobs.analysis.analyse": {
            "sparkjobs.table.compacted",
            "sparkjobs.compaction.lines",
            "sparkjobs.compaction.compact",
            "sparkjobs.compaction.sparkplan.SparkPlan",
        }
    }
    assert _analysis_breaches(bad) == {
        "sparkjobs.analysis.analyse": [
            "sparkjobs.compaction.compact",
            "sparkjobs.compaction.sparkplan.SparkPlan",
        ]
    }


def test_the_shared_modules_import_no_concern() -> None:
    """What every job shares (sparkjobs/'s root) imports no subpackage, so each concern
    can use it without importing the others; only the entry point (cli.py) reaches
    every job, and session.py the object reader's jar (:data:`ROOT_MAY_IMPORT`)."""
    assert "sparkjobs.compaction.compact" in SPARK_GRAPH["sparkjobs.cli"]
    assert _root_breaches(SPARK_GRAPH) == {}
    bad = {
        "sparkjobs.cli": {"sparkjobs.compaction.compact"},
        "sparkjobs.io": {"sparkjobs.table.table"},
        "sparkjobs.session": {"sparkjobs.compaction.objectreader", "sparkjobs.compaction.plan"},
        "sparkjobs.table.table": {"sparkjobs.compaction.job"},
    }
    assert _root_breaches(bad) == {
        "sparkjobs.io": ["sparkjobs.table.table"],
        "sparkjobs.session": ["sparkjobs.compaction.plan"],
    }
