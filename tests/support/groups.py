"""One pytest-xdist worker for every test that shares the Spark session.

A Spark JVM costs ~10 s to start and up to two cores while it runs, so ``make test``
keeps one: the controller (which collects nothing itself) sends all tests of the files
that take the ``spark`` fixture to one worker, and every other test alone to whichever
worker is free (:class:`SparkGroupScheduling`). Which files those are is read from
their source (:func:`spark_files`: a function with a parameter named ``spark``), and
each worker checks that reading against what it collected (:func:`unscheduled`), so a
test that reaches the session some other way fails the run instead of starting a
second JVM unnoticed. The chaos runs of the deep tier are the one exception: a group
and a JVM of their own (:data:`OWN_SESSIONS`).

pytest-xdist's own ``--dist loadgroup`` does this by marks, but renames node ids in a
way pytest 9 no longer sees: its groups are silently ignored there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

SPARK_GROUP = "spark"
OWN_SESSIONS = frozenset({"tests/chaos/test_chaos.py"})
"""Files whose tests run long enough (80-100 s each: the chaos matrix, deep tier) that
they are a group of their own, on a worker with a JVM of its own, beside the Spark
group's worker rather than in turn after it (one at a time: each run is a fleet)."""


@cache
def spark_files(root: Path) -> frozenset[str]:
    """Test files (root-relative, ``/``-separated) with a test or fixture taking ``spark``,
    but for :data:`OWN_SESSIONS`."""
    found: set[str] = set()
    for path in sorted((root / "tests").rglob("test_*.py")):
        if path.relative_to(root).as_posix() in OWN_SESSIONS:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                names = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
                if SPARK_GROUP in names + [a.arg for a in arguments.kwonlyargs]:
                    found.add(path.relative_to(root).as_posix())
                    break
    return frozenset(found)


def scope(nodeid: str, files: frozenset[str]) -> str:
    """The unit a worker takes whole: the Spark group, a file of :data:`OWN_SESSIONS`,
    or the test alone."""
    path = nodeid.split("::", 1)[0]
    if path in OWN_SESSIONS:
        return path
    return SPARK_GROUP if path in files else nodeid


def unscheduled(items: Iterable[Any], files: frozenset[str]) -> list[str]:
    """Node ids of tests that use the ``spark`` fixture outside :func:`spark_files` (and
    outside :data:`OWN_SESSIONS`)."""
    return [
        item.nodeid
        for item in items
        if SPARK_GROUP in getattr(item, "fixturenames", ())
        and item.nodeid.split("::", 1)[0] not in files | OWN_SESSIONS
    ]


def make_scheduler(config: Any, log: Any) -> Any:
    """A LoadScopeScheduling whose scopes are :func:`scope`'s (xdist imported here: the
    hook runs only where xdist is installed and in use)."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    files = spark_files(Path(config.rootpath))

    class SparkGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid, files)

    return SparkGroupScheduling(config, log)
