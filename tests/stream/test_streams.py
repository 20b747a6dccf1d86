"""Stream identities and lease keys of a multi-stream lease table, and which streams a
fleet consumes, without AWS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from consumer.leases.keys import StreamId, lease_key, parents_of_item, split_key, stream_attributes
from consumer.stream.streams import Listed, StreamChoice, plan_streams

_NAMES = st.text(st.sampled_from("abcXYZ019_.-"), min_size=1, max_size=128)
_SHARDS = st.from_regex(r"shardId-[0-9]{12}", fullmatch=True)
T0 = datetime(2026, 11, 25, tzinfo=UTC)


def _arn(name: str, account: str = "123456789012") -> str:
    return f"arn:aws:kinesis:eu-west-1:{account}:stream/{name}"


@given(
    account=st.from_regex(r"[0-9]{12}", fullmatch=True),
    name=_NAMES,
    created=st.integers(0, 2**40),
    shard=_SHARDS,
)
def test_lease_keys_round_trip_and_read_as_kcl_writes_them(
    account: str, name: str, created: int, shard: str
) -> None:
    stream = StreamId(account, name, created)
    key = lease_key(stream, shard)
    assert key == f"{account}:{name}:{created}:{shard}"  # KCL's MultiStreamLease key
    assert split_key(key) == (stream, shard)
    assert StreamId.parse(stream.serialized) == stream
    assert split_key(lease_key(None, shard)) == (None, shard)


def test_a_stream_id_comes_from_its_arn_and_creation_time() -> None:
    created = T0 + timedelta(seconds=0.9)
    assert StreamId.of(_arn("orders"), created) == StreamId(
        "123456789012", "orders", int(T0.timestamp())
    )
    with pytest.raises(ValueError, match="not a Kinesis stream ARN"):
        StreamId.of("arn:aws:s3:::bucket", T0)
    with pytest.raises(ValueError, match="not a lease key"):
        split_key("123456789012:orders")


def test_the_choice_parses_names_arns_and_patterns() -> None:
    choice = StreamChoice.parse(f"orders, {_arn('payments')}, clicks-*, ,logs-20[0-9][0-9]")
    assert choice.names == {"orders"}
    assert choice.arns == {_arn("payments")}
    assert choice.patterns == ("clicks-*", "logs-20[0-9][0-9]")
    for bad, reason in [
        ("", "names no stream"),
        ("orders/x", "no stream name"),
        ("arn:aws:kinesis:eu-west-1:1:stream/x", "not a Kinesis stream ARN"),
    ]:
        with pytest.raises(ValueError, match=reason):
            StreamChoice.parse(bad)


def test_matching_and_what_is_absent() -> None:
    choice = StreamChoice.parse(f"orders,{_arn('payments')},clicks-*,gone")
    listed = [Listed(_arn(n), T0) for n in ("orders", "payments", "clicks-eu", "clicks", "x")]
    assert [s.id.name for s in listed if choice.matches(s)] == ["orders", "payments", "clicks-eu"]
    assert choice.absent(listed) == ["gone"]
    other_account = Listed(_arn("payments", "210987654321"), T0)
    assert not choice.matches(other_account)  # an ARN names one account's stream
    assert StreamChoice.parse("payments").matches(other_account)  # a name: any account


def test_a_stream_is_retired_only_after_missing_for_the_grace_period() -> None:
    """New matches start at once; a stream missing from one listing is kept, and retired
    once missing for the grace period; one created again under its name is new."""
    choice = StreamChoice.parse("orders,clicks-*")
    orders, clicks = Listed(_arn("orders"), T0), Listed(_arn("clicks-a"), T0)
    first = plan_streams(
        [], [orders, clicks], choice, now=0.0, missing_since={}, grace_seconds=60.0
    )
    assert first.start == sorted([orders.id, clicks.id])
    assert first.retire == []
    consumed = first.start
    gone = plan_streams(consumed, [orders], choice, now=10.0, missing_since={}, grace_seconds=60.0)
    assert (gone.start, gone.retire, gone.missing_since) == ([], [], {clicks.id: 10.0})
    back = plan_streams(
        consumed,
        [orders, clicks],
        choice,
        now=20.0,
        missing_since=gone.missing_since,
        grace_seconds=60.0,
    )
    assert back.missing_since == {}
    still = plan_streams(
        consumed, [orders], choice, now=30.0, missing_since=gone.missing_since, grace_seconds=60.0
    )
    assert still.retire == []
    later = plan_streams(
        consumed, [orders], choice, now=70.0, missing_since=still.missing_since, grace_seconds=60.0
    )
    assert later.retire == [clicks.id]
    assert later.missing_since == {}
    again = Listed(_arn("orders"), T0 + timedelta(days=1))  # deleted and created again
    renewed = plan_streams(
        [orders.id], [again], choice, now=80.0, missing_since={}, grace_seconds=0.0
    )
    assert renewed.start == [again.id]
    assert renewed.retire == [orders.id]


@given(
    steps=st.lists(
        st.tuples(st.integers(1, 30), st.sets(st.sampled_from("abcde"))), min_size=1, max_size=40
    ),
    grace=st.sampled_from([0.0, 15.0, 60.0]),
)
def test_over_any_listings_streams_follow_the_listing_after_the_grace(
    steps: list[tuple[int, set[str]]], grace: float
) -> None:
    """Each listing's matches are consumed after it; a stream is retired only when it
    has been absent from every listing for the grace period, and one absent that long
    is retired."""
    choice = StreamChoice.parse("a,b,c-*,d")  # e never matches
    consumed: set[StreamId] = set()
    missing: dict[StreamId, float] = {}
    now = 0.0
    for advance, names in steps:
        now += advance
        listed = [Listed(_arn(n), T0) for n in sorted(names)]
        plan = plan_streams(
            consumed, listed, choice, now=now, missing_since=missing, grace_seconds=grace
        )
        wanted = {s.id for s in listed if choice.matches(s)}
        assert set(plan.start) <= wanted
        for stream in plan.retire:
            assert stream not in wanted
        consumed = (consumed | set(plan.start)) - set(plan.retire)
        missing = plan.missing_since
        assert wanted <= consumed
        for stream in consumed - wanted:
            assert stream in missing  # kept through its grace, and remembered
            assert now - missing[stream] < grace


@given(
    st.builds(StreamId, st.from_regex(r"[0-9]{12}", fullmatch=True), _NAMES, st.integers(0, 2**40)),
    _SHARDS,
    st.sets(_SHARDS, max_size=2),
)
def test_a_multi_stream_items_parents_round_trip_as_keys(
    stream: StreamId, shard: str, parents: set[str]
) -> None:
    """Written as KCL writes them (parents by shard id), read back as lease keys."""
    keys = {lease_key(stream, p) for p in parents}
    item = {
        "leaseKey": {"S": lease_key(stream, shard)},
        **stream_attributes(lease_key(stream, shard), keys),
    }
    assert item["streamName"] == {"S": stream.serialized}
    assert item["shardId"] == {"S": shard}
    assert set(item.get("parentShardId", {}).get("SS", [])) == parents
    assert parents_of_item(item) == keys


def test_a_single_stream_item_keeps_plain_parents() -> None:
    item = stream_attributes("shardId-000000000002", {"shardId-000000000000"})
    assert item == {"parentShardId": {"SS": ["shardId-000000000000"]}}
    assert parents_of_item(item) == {"shardId-000000000000"}


def test_the_landers_own_items_carry_no_stream() -> None:
    """Worker-id claims are keyed ``lander-worker:<id>``: a colon, but no stream."""
    assert stream_attributes("lander-worker:w1", set()) == {}
