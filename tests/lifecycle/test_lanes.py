"""A worker's lanes (one per stream) and the watch that opens and retires them, without
AWS: lanes found by lease key, listings joined only once every stream was listed, and
the watch's decisions over a sequence of listings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from structlog.testing import capture_logs

from consumer.leases.keys import StreamId, lease_key
from consumer.lifecycle.agreement import LandingDiffersError
from consumer.lifecycle.lanes import GRACE_LISTINGS, Lane, Lanes, StreamWatch
from consumer.lifecycle.processor import RecordProcessor
from consumer.metrics import LanderMetrics
from consumer.stream.memory import MemoryStream
from consumer.stream.streams import Listed, StreamChoice

T0 = datetime(2026, 11, 26, tzinfo=UTC)
ACCOUNT = "123456789012"


def _listed(name: str, created: datetime = T0) -> Listed:
    return Listed(f"arn:aws:kinesis:eu-west-1:{ACCOUNT}:stream/{name}", created)


def _no_processor() -> RecordProcessor:
    raise AssertionError("no shard is processed here")


def _lane(stream: StreamId | None, name: str = "s") -> Lane:
    return Lane(stream, name, MemoryStream(1), _no_processor)


def test_a_lease_key_finds_its_lane_and_shard() -> None:
    orders = StreamId(ACCOUNT, "orders", 1)
    lanes = Lanes([_lane(orders, "orders")])
    assert lanes.multi
    found = lanes.of_key(lease_key(orders, "shardId-000000000007"))
    assert found is not None
    assert found[1] == "shardId-000000000007"
    assert not lanes.consumes(lease_key(StreamId(ACCOUNT, "orders", 2), "shardId-000000000007"))
    assert not lanes.consumes("shardId-000000000007")  # a single-stream key
    assert not lanes.consumes("1:2")  # no lease key at all
    single = Lanes([_lane(None)])
    assert not single.multi
    assert single.consumes("shardId-000000000007")


def test_listings_join_once_every_lane_was_listed() -> None:
    a, b = StreamId(ACCOUNT, "a", 1), StreamId(ACCOUNT, "b", 1)
    lanes = Lanes([_lane(a, "a"), _lane(b, "b")])
    lanes.by_id[a].listed = {lease_key(a, "shardId-000000000000")}
    assert lanes.listed() is None  # b's parents could not be judged yet
    lanes.by_id[b].listed = set()
    assert lanes.listed() == {lease_key(a, "shardId-000000000000")}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_watch_opens_new_streams_and_retires_gone_ones_after_three_listings() -> None:
    listing: list[Listed] = [_listed("orders-1"), _listed("other")]
    made: list[StreamId] = []

    async def lister() -> list[Listed]:
        return list(listing)

    async def make(stream: StreamId) -> Lane:
        made.append(stream)
        return _lane(stream, stream.name)

    clock = Clock()
    watch = StreamWatch(StreamChoice.parse("orders-*"), lister, make, interval=10, clock=clock)
    lanes = Lanes([])
    opened, retired = await watch.plan(lanes)
    assert [lane.name for lane in opened] == ["orders-1"]
    assert retired == []
    for lane in opened:
        lanes.add(lane)
    one = opened[0].stream_id
    assert one is not None
    listing[:] = [_listed("orders-2")]  # orders-1 deleted (or one listing missed it)
    for n in range(GRACE_LISTINGS):
        opened, retired = await watch.plan(lanes)
        if n == 0:
            assert [lane.name for lane in opened] == ["orders-2"]
            lanes.add(opened[0])
        assert retired == []
        clock.now += 10
    opened, retired = await watch.plan(lanes)
    assert (opened, retired) == ([], [one])


async def test_a_listing_that_misses_a_stream_once_retires_nothing() -> None:
    listing = [_listed("orders-1")]

    async def lister() -> list[Listed]:
        return list(listing)

    async def make(stream: StreamId) -> Lane:
        return _lane(stream, stream.name)

    clock = Clock()
    watch = StreamWatch(StreamChoice.parse("orders-1"), lister, make, interval=10, clock=clock)
    lanes = Lanes([])
    for lane in (await watch.plan(lanes))[0]:
        lanes.add(lane)
    saved, listing[:] = list(listing), []
    clock.now += 10
    assert await watch.plan(lanes) == ([], [])
    listing[:] = saved
    clock.now += 100
    assert await watch.plan(lanes) == ([], [])
    assert watch.missing_since == {}


async def test_a_stream_created_again_replaces_the_old_lane_at_once() -> None:
    listing = [_listed("orders")]

    async def lister() -> list[Listed]:
        return list(listing)

    async def make(stream: StreamId) -> Lane:
        return _lane(stream, stream.name)

    watch = StreamWatch(StreamChoice.parse("orders"), lister, make, interval=10, clock=Clock())
    lanes = Lanes([])
    (old,), _ = await watch.plan(lanes)
    lanes.add(old)
    listing[:] = [_listed("orders", T0 + timedelta(hours=1))]
    (new,), retired = await watch.plan(lanes)
    assert retired == [old.stream_id]
    assert new.stream_id is not None
    assert old.stream_id is not None
    assert new.stream_id.created - old.stream_id.created == 3600


async def test_a_stream_whose_lane_cannot_open_is_tried_again_and_stops_no_other() -> None:
    """In efo mode a lane opens only once its stream consumer is ACTIVE: a stream whose
    consumer cannot be registered must not keep the others from opening, nor be
    forgotten (the next listing tries again)."""
    listing = [_listed("orders-1"), _listed("orders-2")]
    broken = {"orders-1"}

    async def lister() -> list[Listed]:
        return list(listing)

    async def make(stream: StreamId) -> Lane:
        if stream.name in broken:
            raise RuntimeError("stream consumer 'app' is not ACTIVE after 120 s (CREATING)")
        return _lane(stream, stream.name)

    watch = StreamWatch(StreamChoice.parse("orders-*"), lister, make, interval=10, clock=Clock())
    lanes = Lanes([])
    opened, retired = await watch.plan(lanes)
    assert ([lane.name for lane in opened], retired) == (["orders-2"], [])
    lanes.add(opened[0])
    broken.clear()
    opened, retired = await watch.plan(lanes)
    assert ([lane.name for lane in opened], retired) == (["orders-1"], [])


async def test_a_stream_whose_landing_is_refused_is_logged_in_one_line() -> None:
    """A stream found later whose landing differs from the fleet's record: not opened,
    logged with its one line and no traceback, and tried again at the next listing."""
    listing = [_listed("orders-1")]
    refusal = "stream orders-1 lands otherwise in this worker than in the fleet (...)"
    refused = [True]

    async def lister() -> list[Listed]:
        return list(listing)

    async def make(stream: StreamId) -> Lane:
        if refused[0]:
            raise LandingDiffersError(refusal)
        return _lane(stream, stream.name)

    watch = StreamWatch(StreamChoice.parse("orders-*"), lister, make, interval=10, clock=Clock())
    with capture_logs() as logs:
        assert await watch.plan(Lanes([])) == ([], [])
    (entry,) = [e for e in logs if e["event"].startswith("stream not opened")]
    assert entry["reason"] == refusal
    assert entry["log_level"] == "error"
    assert "exc_info" not in entry
    refused[0] = False
    opened, _ = await watch.plan(Lanes([]))
    assert [lane.name for lane in opened] == ["orders-1"]


def test_shard_series_are_labelled_by_stream() -> None:
    """A worker of several streams holds shards of the same id in each: every per-shard
    series names the stream, and a lost lease's gauges go with their stream."""
    metrics = LanderMetrics()
    metrics.stream = "orders"  # a single-stream worker's shards
    clicks = lease_key(StreamId(ACCOUNT, "clicks", 5), "shardId-000000000001")
    assert metrics.shard("shardId-000000000001") == ("orders", "shardId-000000000001")
    assert metrics.shard(clicks) == ("clicks", "shardId-000000000001")
    metrics.behind_latest.labels("clicks", "shardId-000000000001").set(5)
    metrics.behind_latest.labels("orders", "shardId-000000000001").set(7)
    metrics.records_landed.labels("clicks", "shardId-000000000001").inc(3)
    metrics.records_landed.labels("orders", "shardId-000000000001").inc(4)
    assert metrics.value("lander_records_landed", stream="clicks") == 3
    assert metrics.value("lander_records_landed", shard_id="shardId-000000000001") == 7
    metrics.forget_shard(clicks)
    sample = metrics.registry.get_sample_value
    assert (
        sample(
            "lander_behind_latest_seconds", {"stream": "clicks", "shard_id": "shardId-000000000001"}
        )
        is None
    )
    assert (
        sample(
            "lander_behind_latest_seconds", {"stream": "orders", "shard_id": "shardId-000000000001"}
        )
        == 7
    )
