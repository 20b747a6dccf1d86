"""dynalite, a second DynamoDB emulator, for the tests of what it does unlike moto.

dynalite refuses a global secondary index added by UpdateTable without
ProvisionedThroughput, even on an on-demand table where AWS itself refuses one with it
(../shared/EMULATORS.md): the one real service answer the tests have for "the owner
index cannot be added". It runs as a child process on loopback and an ephemeral port,
in memory, installed with the other npm emulators (``make emulators``); it is stopped
by PID.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from consumer.cli.emulators.stack import DUMMY_CREDENTIAL, NODE_MODULES, REGION, _Child

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient

LAUNCHER = Path(__file__).with_name("dynalite_server.js")
START_SECONDS = 20.0


@contextlib.contextmanager
def running_dynalite() -> Iterator[str]:
    """Start a dynalite; its URL; stopped (this PID) on the way out."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "dynalite" / "package.json").is_file():
        pytest.fail("dynalite is not installed: run `make emulators`")
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    child = _Child.spawn("dynalite", [node, str(LAUNCHER)], env)
    try:
        port = child.wait_for_port(time.monotonic() + START_SECONDS)
        yield f"http://127.0.0.1:{port}"
    finally:
        child.stop(5.0)


@contextlib.asynccontextmanager
async def dynalite_client(endpoint: str) -> AsyncIterator[DynamoDBClient]:
    """An aiobotocore DynamoDB client of a dynalite."""
    from aiobotocore.session import get_session

    async with get_session().create_client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=DUMMY_CREDENTIAL,
        aws_secret_access_key=DUMMY_CREDENTIAL,
    ) as client:
        yield client
