"""Shared fixtures for the test suite, the two tiers, and the marks that keep `make
test-fast` pure.

Tiers (docs/development.md): ``--tier fast`` (``make test``) runs every test not marked
``deep`` and fails the run if one of them spent more than :data:`FAST_TIER_SECONDS` in
its call, naming it: a test that slow belongs in the deep tier. The one exception is an
end-to-end run the fast tier must keep (the demo-sized pipeline): it declares its own
limit with ``fast_tier_budget(seconds, why)`` and is held to that. ``--tier deep`` (``make
test-deep``) runs only the ``deep`` ones. Without ``--tier``, both run (``soak`` aside).
Under pytest-xdist (``--dist loadgroup``), the files whose tests share the ``spark``
session go to one worker, so one JVM serves them all (tests/support/groups.py).

Every test that uses the embedded AWS stack (``local_stack``, ``aws_env``,
``aws_clients``) is marked ``emulator``, and every test that uses the ``spark`` session
is marked ``spark``, by :func:`pytest_collection_modifyitems`: a mark cannot be
forgotten. Tests that start processes of their own (a ``lander`` subprocess, the
worker cluster, promtool) carry ``processes`` explicitly. ``make test-fast`` deselects
all three and sets ``TEST_FAST_NO_PROCESSES=1``, which makes starting any process
during the run fail the test that tried (:func:`pytest_sessionstart`).
"""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
from hypothesis import settings

from tests.support import groups
from tests.support.load import load_factor

# The project's modules are imported inside the fixtures, not here: an xdist worker
# imports this file before pytest-cov starts measuring, so a module imported here would
# have its definitions counted as never run.
if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from types_aiobotocore_kinesis import KinesisClient

    from consumer.aws import Clients
    from consumer.cli.emulators import LocalStack

# No wall-clock deadlines: on a shared 2-core CI machine a trivial example can take
# 700 ms once, and a timing is not what these properties are about.
settings.register_profile("lander", deadline=None)
settings.load_profile("lander")

# `lander compact` subprocesses of the tests keep no AppCDS archive in the user's cache
# (writing one costs a run ~40 CPU-s once); tests/sparkjobs/test_jvm_options.py
# gives one a folder of its own.
os.environ.setdefault("LANDER_SPARK_CDS", "off")

EMULATOR_FIXTURES = frozenset({"local_stack", "aws_env", "aws_clients"})
"""Fixtures that boot the embedded AWS stack (kinesalite and moto, two processes)."""
SPARK_FIXTURES = frozenset({"spark"})
"""Fixtures that start a Spark JVM."""
NO_PROCESSES = "TEST_FAST_NO_PROCESSES"
"""Set (to 1) by `make test-fast`: starting a process fails the test."""
REFUSAL = "test-fast must start no process: mark this test emulator, processes or spark"
FAST_TIER_SECONDS = float(os.environ.get("LANDER_TEST_FAST_TIER_SECONDS") or 20.0)
"""A test of the fast tier whose call takes longer than this on a machine with a core to
spare fails the run: mark it deep. When the run queue is longer than the cores (xdist's
workers, their emulators and Spark's JVM on 2 cores), every test shares a core, so the
limit grows by the load per core at the time: :func:`load_factor`."""
TIERS = ("fast", "deep", "all")

# What the guard replaced, to put back at the end of the session.
_saved: list[tuple[object, str, object]] = []
# The tests that tried to start a process (even if they caught the refusal).
_refused: list[str] = []


# Tests of the fast tier whose call ran over their limit: (node id, seconds, limit).
_too_slow: list[tuple[str, float, float]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="all",
        help="fast: the tests not marked deep, none slower than "
        f"{FAST_TIER_SECONDS:.0f} s (make test); deep: only those marked deep "
        "(make test-deep); all: both (the default)",
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark each test by the fixtures it uses: ``emulator`` for the AWS stack, ``spark``
    for the Spark session (here, not in the collection's last hook, so that every later
    hook sees the marks whichever plugin runs first)."""
    budget = item.get_closest_marker("fast_tier_budget")
    limit = float(budget.args[0]) if budget is not None else FAST_TIER_SECONDS
    item.user_properties.append(("fast_tier_limit", limit))  # reaches xdist's controller
    names = set(getattr(item, "fixturenames", ()))
    if names & EMULATOR_FIXTURES:
        item.add_marker(pytest.mark.emulator)
    if names & SPARK_FIXTURES:
        item.add_marker(pytest.mark.spark)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadgroup``: the Spark files on one worker, every other test alone."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    return groups.make_scheduler(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the ``--tier``'s tests; under ``--dist loadgroup`` (on each xdist worker, or
    in a run with ``-n 0``), refuse a test that would start a Spark session outside the
    Spark group."""
    grouped = config.getoption("loadgroup", False) or config.getoption("dist", None) == "loadgroup"
    if grouped:
        strays = groups.unscheduled(items, groups.spark_files(config.rootpath))
        if strays:
            raise pytest.UsageError(
                f"{strays[0]} uses the spark fixture but tests/support/groups.py did not "
                "find it in its file's source: take ``spark`` as a parameter there"
            )
    tier = config.getoption("--tier")
    if tier == "all":
        return
    keep = [
        item for item in items if (item.get_closest_marker("deep") is not None) == (tier == "deep")
    ]
    if len(keep) < len(items):
        kept = set(map(id, keep))
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
        items[:] = keep


def _runqueue_wait() -> float:
    """Seconds this thread has waited for a core (Linux schedstat; 0 where it is missing)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Note how long the test's thread waited for a core during its call: the fast
    tier's limit is on the time the test would take with a core of its own."""
    waited = _runqueue_wait()
    try:
        return (yield)
    finally:
        item.user_properties.append(("runqueue_wait", _runqueue_wait() - waited))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note a fast-tier test whose call ran over its limit (:data:`FAST_TIER_SECONDS` or
    its ``fast_tier_budget``, times :func:`load_factor`), less the time its thread waited
    for a core (under xdist, on the controller, which receives every worker's reports)."""
    if report.when != "call":
        return
    properties = dict(report.user_properties)
    limit = float(str(properties.get("fast_tier_limit", FAST_TIER_SECONDS))) * load_factor()
    alone = report.duration - float(str(properties.get("runqueue_wait", 0.0)))
    if alone > limit:
        _too_slow.append((report.nodeid, alone, limit))


def _refuse(*_: object, **__: object) -> Any:
    test = os.environ.get("PYTEST_CURRENT_TEST", "outside any test").removesuffix(" (call)")
    _refused.append(test)
    raise AssertionError(REFUSAL)


def _refuse_popen(self: subprocess.Popen[Any], *args: object, **kwargs: object) -> None:
    vars(self)["_child_created"] = False  # what Popen.__del__ reads first (private)
    _refuse(*args, **kwargs)


def _replace(owner: object, name: str, value: Callable[..., Any]) -> None:
    if hasattr(owner, name):
        _saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under `make test-fast`, make every way of starting a process raise."""
    if os.environ.get(NO_PROCESSES) != "1":
        return
    _replace(subprocess.Popen, "__init__", _refuse_popen)  # also asyncio's subprocesses
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        _replace(os, name, _refuse)
    _replace(multiprocessing.util, "spawnv_passfds", _refuse)  # spawn and forkserver


def _fast_tier_overruns(config: pytest.Config) -> list[tuple[str, float, float]]:
    """The fast tier's overruns, on the process that reports (not on an xdist worker)."""
    if config.getoption("--tier") != "fast" or hasattr(config, "workerinput"):
        return []
    return _too_slow


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Put back what :func:`pytest_sessionstart` replaced; fail the run if a test tried
    to start a process, even one that caught the refusal, or if a fast-tier test ran
    over its limit."""
    while _saved:
        owner, name, value = _saved.pop()
        setattr(owner, name, value)
    failed = _refused or _fast_tier_overruns(session.config)
    if failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the tests that tried to start a process under `make test-fast`, and the
    fast-tier tests that ran over their limit."""
    if _refused:
        terminalreporter.section("started a process under test-fast", red=True)
        for test in dict.fromkeys(_refused):
            terminalreporter.line(f"{test}: {REFUSAL}")
    overruns = _fast_tier_overruns(terminalreporter.config)
    if overruns:
        terminalreporter.section("too slow for the fast tier", red=True)
        for test, seconds, limit in overruns:
            terminalreporter.line(
                f"{test}: its call took {seconds:.1f} s (not counting waits for a core), "
                "over the fast tier's "
                f"{limit:.0f} s (its limit times the load per core): mark it deep "
                "(docs/development.md)"
            )


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """One embedded AWS stack (kinesalite, serialised moto) for the whole session."""
    from consumer.cli.emulators import LocalStack

    stack = LocalStack().start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def fanout_stack() -> Iterator[LocalStack]:
    """A second stack whose Kinesis is kinesis-local: the emulator with enhanced fan-out."""
    from consumer.cli.emulators import LocalStack

    stack = LocalStack(kinesis="kinesis-local").start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def fanout_kinesis(fanout_stack: LocalStack) -> AsyncIterator[KinesisClient]:
    """A Kinesis client on kinesis-local (the tolerant event-stream parser included)."""
    from consumer.aws import aws_session, client_config

    env = fanout_stack.env()
    async with aws_session().create_client(
        "kinesis",
        region_name=env["AWS_REGION"],
        endpoint_url=env["AWS_ENDPOINT_URL_KINESIS"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        config=client_config(),
    ) as client:
        yield client


@pytest.fixture(scope="session")
def aws_env(local_stack: LocalStack) -> Iterator[dict[str, str]]:
    """Point every AWS client of this process (and its children) at the local stack."""
    saved = dict(os.environ)
    os.environ.update(local_stack.env())
    try:
        yield local_stack.env()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aws_clients(aws_env: dict[str, str]) -> AsyncIterator[Clients]:
    """Kinesis, DynamoDB and S3 clients on the local stack, shared by the session."""
    from consumer.aws import Clients

    async with Clients() as clients:
        yield clients


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] Spark session for every test that needs one (a JVM costs ~10 s)."""
    from sparkjobs.session import JvmPlan, get_session

    # C1 only, as `lander compact` runs a small archive: the tests' inputs are all small,
    # and C2's compilations cost more CPU than they save in runs this short.
    session = get_session("local[2]", app="lander-tests", jvm=JvmPlan(c1_only=True))
    session.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        yield session
    finally:
        session.stop()
