"""One exception tree: every error the daemon raises on purpose is a LanderError with
its retry policy, drawn in consumer/errors.py; botocore's never leave the stores."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import uuid
from typing import Any

import pytest

import consumer
from consumer import errors
from consumer.errors import LanderError, is_retriable
from consumer.leases.dynamo import DynamoLeaseStore
from consumer.leases.store import LeaseStoreError
from consumer.sequence import Sentinel

# Two ValueErrors of pure parsers, caught where they are raised (a KPL record becomes a
# dead letter; the archive format imports nothing of the daemon, by design). The
# operator layer (consumer.cli) has its own errors and is not walked. EffectNotDone is
# not the daemon's: a user's effect raises it to say it did not happen (consumer.effects).
OUTSIDE = {"KplError", "LineError", "EffectNotDone"}


def _daemon_exceptions() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(consumer.__path__, "consumer."):
        if info.name.startswith("consumer.cli") or info.name.endswith("__main__"):
            continue  # the operator layer (its own errors) and entry points
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(value, BaseException)
                and value.__module__ == info.name
                and value.__name__ not in OUTSIDE
            ):
                found.append(value)
    return found


def test_every_daemon_error_is_in_the_tree_with_its_policy() -> None:
    """Each exception class of the daemon derives from LanderError, has a boolean
    retriable, and is named in the tree drawn in consumer/errors.py."""
    classes = _daemon_exceptions()
    assert len(classes) >= 12
    drawing = errors.__doc__ or ""
    for cls in classes:
        assert issubclass(cls, LanderError), cls
        assert isinstance(cls.retriable, bool), cls
        assert cls.__name__ in drawing, f"{cls.__name__} is missing from the tree"


def test_retriable_is_what_the_loops_retry() -> None:
    """Loops retry retriable LanderErrors and bare timeouts or OS errors, nothing else."""
    from consumer.stream import StreamNotFoundError, ThrottledError

    assert is_retriable(ThrottledError("slow down"))
    assert not is_retriable(StreamNotFoundError("gone"))
    assert is_retriable(LeaseStoreError("5xx", retriable=True))
    assert not is_retriable(LeaseStoreError("denied", retriable=False))
    assert is_retriable(TimeoutError())
    assert is_retriable(ConnectionResetError())
    assert not is_retriable(ValueError("a bug"))


@pytest.mark.emulator
async def test_the_dynamodb_store_wraps_botocore(aws_clients: Any) -> None:
    """An unreachable endpoint is a retriable LeaseStoreError; a request DynamoDB
    refuses (an empty key) is a non-retriable one; never a botocore error."""
    from aiobotocore.session import get_session

    from consumer.aws import client_config

    session = get_session()
    async with session.create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=client_config(),
    ) as down:
        with pytest.raises(LeaseStoreError) as unreachable:
            await DynamoLeaseStore(down, "leases").list_leases()
    assert unreachable.value.retriable
    store = DynamoLeaseStore(aws_clients.dynamodb, f"leases-{uuid.uuid4().hex[:8]}")
    await store.ensure_table()
    with pytest.raises(LeaseStoreError) as refused:
        await store.create_lease("", frozenset(), Sentinel.TRIM_HORIZON)  # an empty key
    assert not refused.value.retriable
    assert "ValidationException" in str(refused.value)
