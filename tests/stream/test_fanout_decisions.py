"""The fan-out rules, pure and property-tested: where a subscription starts, and what
an event means for the shard (KCL's validation of the end)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from consumer.sequence import Position, Sentinel
from consumer.stream import KinesisRecord, StartAt
from consumer.stream.fanout import ChildShard, ShardEvent, Verdict, judge, starting_position

SHARD = "shardId-000000000003"
sequences = st.integers(min_value=0, max_value=2**185)
shard_ids = st.sampled_from([f"shardId-{i:012d}" for i in range(6)])
children = st.lists(
    st.builds(ChildShard, shard_ids, st.frozensets(shard_ids, min_size=1, max_size=2)),
    max_size=3,
)


def _record(sequence: int) -> KinesisRecord:
    return KinesisRecord(sequence, "k", b"", datetime(2026, 1, 1, tzinfo=UTC))


@given(st.none() | sequences, st.none() | sequences, st.sampled_from(list(Sentinel)))
def test_a_continuation_always_wins_over_the_start(
    after: int | None, at: int | None, kind: Sentinel
) -> None:
    start = StartAt(None, Position(at)) if at is not None else StartAt(kind)
    position = starting_position(start, after)
    if after is not None:
        assert position == {"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": str(after)}
    elif at is not None:
        assert position == {"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": str(at)}
    else:
        assert position["Type"] == str(kind)


@given(st.none() | sequences, st.none() | children, st.lists(sequences, max_size=3))
def test_only_a_missing_continuation_with_descendants_ends_the_shard(
    continuation: int | None, kids: list[ChildShard] | None, records: list[int]
) -> None:
    event = ShardEvent(
        [_record(s) for s in records], continuation, 0, None if kids is None else tuple(kids)
    )
    judged = judge(SHARD, event)
    descendants = bool(kids) and all(SHARD in c.parents for c in kids or ())
    if continuation is None and descendants:
        assert judged.verdict is Verdict.SHARD_END
        assert judged.children == tuple(kids or ())
    elif continuation is not None and not kids:
        assert judged.verdict is Verdict.CONTINUE
    else:
        assert judged.verdict is Verdict.INVALID
        assert judged.reason
