"""The ``efo`` read mode: SubscribeToShard through a registered stream consumer
(enhanced fan-out, :class:`~consumer.stream.subscriber.SubscriptionReader`).

Started for a stream, it opens a Kinesis client of its own for the subscriptions (each
leased shard holds one connection open, so the pool is sized by the stream's open
shards, and its read timeout lies beyond the reader's silence bound), registers the
stream consumer (``LANDER_EFO_CONSUMER``) if it is missing and waits until it is
ACTIVE. It never deregisters it: stopping one worker must not cut off the others;
``lander efo deregister`` does, on request. With ``LANDER_STREAMS`` each stream has its
consumer (of the same name, registered under each stream's ARN) and its own client.
"""

from __future__ import annotations

from aiobotocore.config import AioConfig
from botocore.exceptions import BotoCoreError, ClientError

from consumer.aws import aws_session, client_config, region
from consumer.stream import FanOutUnsupportedError, StreamError
from consumer.stream.fanout import FanOutReading, ensure_consumer
from consumer.stream.kinesis_fanout import KinesisFanOut
from consumer.stream.readers import (
    BatchReader,
    ModeStartError,
    ModeState,
    ReaderFactory,
    ShardRead,
    StreamOpening,
)
from consumer.stream.subscriber import END_CHECK_SECONDS, SILENCE_SECONDS, SubscriptionReader

SUBSCRIPTION_READ_TIMEOUT = SILENCE_SECONDS + 5
"""The subscription client's socket read timeout: beyond the reader's silence bound,
so a quiet subscription is restarted by the reader, not failed by the socket."""
REGISTER_SECONDS = 120.0
"""How long a starting worker waits for its stream consumer to become ACTIVE."""
POOL_FLOOR = 50
"""The subscription client's smallest connection pool."""


def fanout(
    reading: FanOutReading, *, end_check_seconds: float = END_CHECK_SECONDS
) -> ReaderFactory:
    """SubscribeToShard through ``reading``'s ACTIVE consumer; a quiet shard is asked
    whether it ended every ``end_check_seconds``."""

    def reader(read: ShardRead) -> BatchReader:
        return SubscriptionReader(
            read.stream,
            reading.client,
            reading.consumer,
            read.shard_id,
            read.checkpoint,
            timestamp=read.timestamp,
            stopping=read.stopping,
            metrics=read.metrics,
            end_check_seconds=end_check_seconds,
            stream_name=read.stream_name,
        )

    return reader


class EnhancedFanOut:
    """The mode object (:class:`~consumer.stream.readers.ReadMode`)."""

    async def start(self, opening: StreamOpening) -> ReaderFactory:
        assert opening.exits is not None, "a started mode closes its client with the worker"
        pool = max(POOL_FLOOR, await _open_shards(opening) + 16)
        config = client_config(max_pool=pool).merge(
            AioConfig(read_timeout=SUBSCRIPTION_READ_TIMEOUT)
        )
        client = await opening.exits.enter_async_context(
            aws_session().create_client("kinesis", region_name=region(), config=config)
        )
        fan = KinesisFanOut(client, opening.stream)
        name = opening.settings.consumer_name
        try:
            consumer = await ensure_consumer(fan, name, within=REGISTER_SECONDS)
        except StreamError as exc:
            raise ModeStartError(
                f"efo read mode: stream consumer {name}{_of(opening)}: {exc}"
            ) from None
        # A quiet shard is asked whether it ended as often as the shards are listed:
        # kinesis-local never ends a closed shard's subscription.
        return fanout(
            FanOutReading(fan, consumer), end_check_seconds=opening.settings.shard_sync_seconds
        )

    async def describe(self, opening: StreamOpening) -> ModeState:
        name = opening.settings.consumer_name
        try:
            found = await KinesisFanOut(opening.kinesis, opening.stream).describe_consumer(name)
        except FanOutUnsupportedError as exc:
            return ModeState("efo", consumer=name, status="unsupported", problem=str(exc))
        except StreamError as exc:
            return ModeState("efo", consumer=name, status=f"unknown: {exc}")
        if found is None:
            return ModeState(
                "efo",
                consumer=name,
                status="not registered",
                would=f"register stream consumer {name}{_of(opening)}",
            )
        return ModeState("efo", consumer=name, status=found.status, arn=found.arn)


def _of(opening: StreamOpening) -> str:
    return f" of stream {opening.stream}" if opening.several else ""


async def _open_shards(opening: StreamOpening) -> int:
    """The stream's open shards, to size the subscription pool (0, the pool's floor,
    if the stream cannot be described now)."""
    try:
        out = await opening.kinesis.describe_stream_summary(StreamName=opening.stream)
    except (ClientError, BotoCoreError, OSError):
        return 0
    return int(out["StreamDescriptionSummary"].get("OpenShardCount", 0))


async def deregister(opening: StreamOpening) -> bool:
    """Deregister the stream consumer (``lander efo deregister``); whether it was
    registered. Raises StreamError."""
    fan = KinesisFanOut(opening.kinesis, opening.stream)
    return await fan.deregister_consumer(opening.settings.consumer_name)


MODE = EnhancedFanOut()
