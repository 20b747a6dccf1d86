"""Shared fixtures for the test suite, and the marks that keep `make test-fast` pure.

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
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
from hypothesis import settings

from consumer.aws import Clients, aws_session, client_config
from consumer.cli.emulators import LocalStack

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from types_aiobotocore_kinesis import KinesisClient

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

# What the guard replaced, to put back at the end of the session.
_saved: list[tuple[object, str, object]] = []
# The tests that tried to start a process (even if they caught the refusal).
_refused: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses: ``emulator`` for the AWS stack,
    ``spark`` for the Spark session (``-m`` deselection runs after this hook)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & EMULATOR_FIXTURES:
            item.add_marker(pytest.mark.emulator)
        if names & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Put back what :func:`pytest_sessionstart` replaced; fail the run if a test tried
    to start a process, even one that caught the refusal."""
    while _saved:
        owner, name, value = _saved.pop()
        setattr(owner, name, value)
    if _refused and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the tests that tried to start a process under `make test-fast`."""
    if _refused:
        terminalreporter.section("started a process under test-fast", red=True)
        for test in dict.fromkeys(_refused):
            terminalreporter.line(f"{test}: {REFUSAL}")


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """One embedded AWS stack (kinesalite, serialised moto) for the whole session."""
    stack = LocalStack().start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def fanout_stack() -> Iterator[LocalStack]:
    """A second stack whose Kinesis is kinesis-local: the emulator with enhanced fan-out."""
    stack = LocalStack(kinesis="kinesis-local").start()
    try:
        yield stack
    finally:
        stack.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def fanout_kinesis(fanout_stack: LocalStack) -> AsyncIterator[KinesisClient]:
    """A Kinesis client on kinesis-local (the tolerant event-stream parser included)."""
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
    async with Clients() as clients:
        yield clients


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] Spark session for every test that needs one (a JVM costs ~10 s)."""
    from sparkjobs.session import get_session

    session = get_session("local[2]", app="lander-tests")
    session.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        yield session
    finally:
        session.stop()
