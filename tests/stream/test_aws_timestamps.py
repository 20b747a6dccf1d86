"""The fast arrival-time parser gives the same instants as botocore's default."""

from __future__ import annotations

from datetime import UTC, datetime

from botocore.utils import parse_timestamp
from hypothesis import given
from hypothesis import strategies as st

from consumer.aws import epoch_timestamp


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
def test_epoch_seconds_give_the_same_instant_as_botocore(value: float) -> None:
    """Same instant, in UTC, for every epoch value Kinesis can send."""
    ours = epoch_timestamp(value)
    assert ours.tzinfo is UTC
    # botocore parses epoch numbers too; its stubs only admit text.
    theirs = parse_timestamp(value)  # type: ignore[arg-type]
    assert abs(ours.timestamp() - theirs.timestamp()) < 1e-6


def test_text_timestamps_fall_back_to_botocore() -> None:
    """ISO text (S3's XML, for example) is parsed as before."""
    assert epoch_timestamp("2026-11-22T10:00:00Z") == datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert epoch_timestamp(1_700_000_000) == datetime.fromtimestamp(1_700_000_000, UTC)
