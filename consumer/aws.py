"""aiobotocore clients with the timeouts and retry policy the daemon relies on.

Endpoints, region and credentials come from the standard AWS variables, which botocore
reads itself. botocore's own retries are kept short (the ``standard`` mode, 3 attempts)
so that a call never hangs the lease loop for long; the callers add their own jittered
backoff where a longer retry makes sense (the shard reader) and treat failure as
"try again next pass" elsewhere (the lease loop).
"""

from __future__ import annotations

import os
import random
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from botocore.utils import parse_timestamp

from consumer.errors import LanderError, UnreachableError
from consumer.stream.eventstream import TolerantParserFactory

if TYPE_CHECKING:
    from types_aiobotocore_dynamodb import DynamoDBClient
    from types_aiobotocore_kinesis import KinesisClient
    from types_aiobotocore_s3 import S3Client

DEFAULT_REGION = "us-east-1"


def client_config(max_pool: int = 50) -> AioConfig:
    """Short timeouts and few retries: the caller owns the retry policy."""
    return AioConfig(
        connect_timeout=5,
        read_timeout=10,
        retries={"max_attempts": 3, "mode": "standard"},
        max_pool_connections=max_pool,
    )


def epoch_timestamp(value: Any) -> datetime:
    """Epoch seconds (how Kinesis' JSON protocol sends ``ApproximateArrivalTimestamp``)
    straight to a UTC datetime; anything else as botocore parses it.

    botocore's default turns every arrival time into a ``tzlocal()`` datetime through
    dateutil, about 12 of the 19 us per record a GetRecords response costs to parse
    (bench drain). The instant is the same; only the zone object differs.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    parsed: datetime = parse_timestamp(value)
    return parsed


def aws_session() -> AioSession:
    """An aiobotocore session whose clients parse timestamps with :func:`epoch_timestamp`
    and read event streams with or without an initial response
    (:mod:`consumer.stream.eventstream`)."""
    session = get_session()
    factory = TolerantParserFactory()
    factory.set_parser_defaults(timestamp_parser=epoch_timestamp)
    session.register_component("response_parser_factory", factory)
    return session


def region() -> str:
    """The region botocore will use, or us-east-1 when none is configured."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


class Clients:
    """The three clients a worker uses, opened and closed together."""

    kinesis: KinesisClient
    dynamodb: DynamoDBClient
    s3: S3Client

    def __init__(self) -> None:
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Clients:
        session = aws_session()
        config = client_config()
        self.kinesis = await self._stack.enter_async_context(
            session.create_client("kinesis", region_name=region(), config=config)
        )
        self.dynamodb = await self._stack.enter_async_context(
            session.create_client("dynamodb", region_name=region(), config=config)
        )
        self.s3 = await self._stack.enter_async_context(
            session.create_client("s3", region_name=region(), config=config)
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError, or '' for anything else."""
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def http_status(exc: BaseException) -> int:
    """The HTTP status of a ClientError, or 0."""
    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    return 0


def root_cause(exc: BaseException) -> BaseException:
    """The first error of a chain (what botocore raised under the wrappers)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def unreachable(exc: BaseException) -> bool:
    """No answer at all: the endpoint did not accept or finish the connection (not an
    AWS error, not missing credentials)."""
    root = root_cause(exc)
    return isinstance(root, BotoCoreError | OSError) and not isinstance(root, NoCredentialsError)


def cause(exc: BaseException) -> str:
    """The reason in a few words: the AWS error code and message, or the connection
    failure; never a credential (botocore's messages name none)."""
    root = root_cause(exc)
    if isinstance(root, NoCredentialsError):
        return "no AWS credentials found (environment, profile or instance role)"
    if isinstance(root, EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError):
        return f"{type(root).__name__}: {root}"
    code = error_code(root)
    if code:
        message = str(root.response.get("Error", {}).get("Message", ""))  # type: ignore[attr-defined]
        return f"{code}: {message}"[:300] if message else code
    return f"{type(root).__name__}: {str(root)[:300]}" if str(root) else type(root).__name__


def call_failure(
    exc: BaseException, where: str, what: str, otherwise: type[LanderError] = LanderError
) -> LanderError:
    """The error to raise for a failed call to ``where``: UnreachableError when the
    endpoint did not answer, else ``otherwise`` with ``what`` and the cause."""
    if unreachable(exc):
        return UnreachableError(f"cannot reach {where}: {cause(exc)}")
    return otherwise(f"{what} ({where}): {cause(exc)}")


def endpoint(client: Any) -> str:
    """Where a client sends its calls (its endpoint URL), for messages."""
    return str(getattr(getattr(client, "meta", None), "endpoint_url", "") or "?")


def backoff(attempt: int, base: float = 0.1, cap: float = 5.0) -> float:
    """Full-jitter exponential backoff: uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0, min(cap, base * (2 ** min(attempt, 30))))
