"""Shared fixtures for the test suite."""

import os
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from hypothesis import settings

from consumer.aws import Clients
from consumer.emulators import LocalStack

# No wall-clock deadlines: on a shared 2-core CI machine a trivial example can take
# 700 ms once, and a timing is not what these properties are about.
settings.register_profile("lander", deadline=None)
settings.load_profile("lander")


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    """One embedded AWS stack (kinesalite, serialised moto) for the whole session."""
    stack = LocalStack().start()
    try:
        yield stack
    finally:
        stack.stop()


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
def spark() -> Iterator[object]:
    """One local[2] Spark session for every test that needs one (a JVM costs ~10 s)."""
    from sparkjobs.session import get_session

    session = get_session("local[2]", app="lander-tests")
    session.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        yield session
    finally:
        session.stop()
