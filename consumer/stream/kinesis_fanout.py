"""Enhanced fan-out on Kinesis (or kinesis-local) through aiobotocore.

Stream consumers are registered, described and deregistered by name under the
stream's ARN; SubscribeToShard's event stream is read with the tolerant parser of
:mod:`consumer.stream.eventstream`. Errors map onto the stream error tree: ResourceInUse is
:class:`~consumer.stream.fanout.SubscriptionInUseError` (retriable), ResourceNotFound
is :class:`~consumer.stream.StreamNotFoundError` (the reader decides what it means),
timeouts and dropped connections inside an event stream are transient.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import aiohttp
from botocore.exceptions import BotoCoreError, ClientError

from consumer.aws import error_code
from consumer.sequence import parse_sequence_number
from consumer.stream import FanOutUnsupportedError, StartAt, TransientStreamError
from consumer.stream.fanout import (
    ChildShard,
    ShardEvent,
    StreamConsumer,
    SubscriptionInUseError,
    starting_position,
)
from consumer.stream.kinesis import raise_stream_error, to_record

if TYPE_CHECKING:
    from types_aiobotocore_kinesis import KinesisClient

_FAILURES = (TimeoutError, ClientError, BotoCoreError, OSError, aiohttp.ClientError)
"""aiohttp's own errors too: a connection dropped mid-stream surfaces as
``ClientPayloadError`` from the event stream, which is a transient cut (the reader
subscribes again after the last event), not a failure of the shard."""


class KinesisFanOut:
    """Stream consumers and subscriptions of one stream, on a shared client."""

    def __init__(self, client: KinesisClient, stream: str) -> None:
        self._client = client
        self.stream = stream
        self._stream_arn: str | None = None

    async def stream_arn(self) -> str:
        """The stream's ARN (consumers are registered under it)."""
        if self._stream_arn is None:
            try:
                summary = await self._client.describe_stream_summary(StreamName=self.stream)
            except _FAILURES as exc:
                _raise(exc)
            self._stream_arn = summary["StreamDescriptionSummary"]["StreamARN"]
        return self._stream_arn

    async def register_consumer(self, name: str) -> StreamConsumer:
        """RegisterStreamConsumer; an existing consumer of that name is described."""
        arn = await self.stream_arn()
        try:
            out = await self._client.register_stream_consumer(StreamARN=arn, ConsumerName=name)
        except _FAILURES as exc:
            if error_code(exc) == "ResourceInUseException":
                found = await self.describe_consumer(name)
                if found is not None:
                    return found
            _raise(exc)
        raw = out["Consumer"]
        return StreamConsumer(raw["ConsumerName"], raw["ConsumerARN"], raw["ConsumerStatus"])

    async def describe_consumer(self, name: str) -> StreamConsumer | None:
        """DescribeStreamConsumer by name; None if not registered."""
        arn = await self.stream_arn()
        try:
            out = await self._client.describe_stream_consumer(StreamARN=arn, ConsumerName=name)
        except _FAILURES as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            _raise(exc)
        raw = out["ConsumerDescription"]
        return StreamConsumer(raw["ConsumerName"], raw["ConsumerARN"], raw["ConsumerStatus"])

    async def deregister_consumer(self, name: str) -> bool:
        """DeregisterStreamConsumer by name; False if it was not registered."""
        arn = await self.stream_arn()
        try:
            await self._client.deregister_stream_consumer(StreamARN=arn, ConsumerName=name)
        except _FAILURES as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            _raise(exc)
        return True

    async def subscribe(
        self, consumer_arn: str, shard_id: str, start: StartAt, after: int | None = None
    ) -> KinesisSubscription:
        """SubscribeToShard; the event stream is read by :meth:`KinesisSubscription.events`.

        Cancellation-safe: a reader cancelled while the call is in flight (its lease was
        lost) must not leave the subscription open, or the service refuses every other
        subscriber of the shard until it times out (five minutes). The call finishes
        on its own and its event stream is closed at once.
        """
        position: Any = starting_position(start, after)
        call = asyncio.ensure_future(
            self._client.subscribe_to_shard(
                ConsumerARN=consumer_arn, ShardId=shard_id, StartingPosition=position
            )
        )
        try:
            out = await asyncio.shield(call)
        except asyncio.CancelledError:
            call.add_done_callback(_close_abandoned)
            raise
        except _FAILURES as exc:
            _raise(exc)
        return KinesisSubscription(out["EventStream"])


def _close_abandoned(call: asyncio.Future[Any]) -> None:
    """Close the event stream of a SubscribeToShard whose caller was cancelled."""
    if call.cancelled() or call.exception() is not None:
        return  # nothing was opened (the exception is retrieved, not left to warn)
    call.result()["EventStream"].close()


class KinesisSubscription:
    """One SubscribeToShard event stream."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._closed = False

    async def events(self) -> AsyncIterator[ShardEvent]:
        """Each ``SubscribeToShardEvent`` as a :class:`ShardEvent`, until the stream ends."""
        try:
            async for raw in self._stream:
                event = raw.get("SubscribeToShardEvent")
                if event is not None:
                    yield to_event(event)
        except _FAILURES as exc:
            if self._closed:
                return
            _raise(exc)

    async def close(self) -> None:
        """Drop the connection (idempotent)."""
        if not self._closed:
            self._closed = True
            self._stream.close()


def to_event(raw: Mapping[str, Any]) -> ShardEvent:
    """A parsed ``SubscribeToShardEvent`` as a :class:`ShardEvent`."""
    records = [to_record(r) for r in raw.get("Records") or []]
    continuation = raw.get("ContinuationSequenceNumber")
    children = raw.get("ChildShards")
    return ShardEvent(
        records=records,
        continuation=None if continuation is None else parse_sequence_number(continuation),
        millis_behind=raw.get("MillisBehindLatest"),
        children=None
        if children is None
        else tuple(
            ChildShard(c["ShardId"], frozenset(c.get("ParentShards") or ())) for c in children
        ),
    )


_UNKNOWN_OPERATION = ("UnknownOperationException", "UnknownOperation", "InvalidAction")


def _raise(exc: BaseException) -> NoReturn:
    code = error_code(exc)
    if code == "ResourceInUseException":
        raise SubscriptionInUseError(str(exc)) from exc
    if code in _UNKNOWN_OPERATION:
        operation = getattr(exc, "operation_name", "") or "the consumer calls"
        raise FanOutUnsupportedError(
            f"this Kinesis endpoint does not serve enhanced fan-out ({code} on "
            f"{operation}): read with LANDER_READ_MODE=polling, or use an endpoint that "
            "does (AWS; kinesis-local, not kinesalite)"
        ) from exc
    if isinstance(exc, ClientError) or code:
        raise_stream_error(exc)
    raise TransientStreamError(repr(exc)) from exc
