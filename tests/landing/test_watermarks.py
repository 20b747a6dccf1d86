"""The per-key watermark filter (``LANDER_DEDUP_KEYS``) against a memory of every
(key, number) seen: it never drops a record it has not seen, and drops every repeat it
can still judge."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.landing.watermarks import WINDOW, NumberPointer, SequenceWatermarks

_EVENTS = st.lists(
    st.tuples(st.sampled_from("abcd"), st.integers(0, 3 * WINDOW)), min_size=1, max_size=300
)


@settings(max_examples=300, deadline=None)
@given(events=_EVENTS, keys=st.integers(1, 5))
def test_never_drops_a_number_not_seen_and_drops_repeats_it_can_judge(
    events: list[tuple[str, int]], keys: int
) -> None:
    """Whatever the order (retries after later numbers, gaps, jumps beyond the window)
    and however few keys are remembered: a dropped record was seen before; a repeat of a
    number seen since its key was last learnt, within the window below the key's highest
    number, is dropped."""
    filter_ = SequenceWatermarks(keys)
    seen: set[tuple[str, int]] = set()
    known: dict[str, set[int]] = {}  # numbers seen since the key was last (re)learnt
    recent: list[str] = []  # keys, least recently used first
    for key, number in events:
        remembered = key in recent[-keys:]
        if not remembered:
            known[key] = set()
        judged = number in known[key] and max(known[key]) - number < WINDOW
        dropped = filter_.seen(key, number)
        if dropped:
            assert (key, number) in seen, "dropped a record never seen"
        assert dropped == judged, (key, number, sorted(known[key]))
        seen.add((key, number))
        known[key].add(number)
        if key in recent:
            recent.remove(key)
        recent.append(key)
        assert len(filter_) <= keys


def test_a_retry_after_later_numbers_is_dropped_and_a_gap_filled_late_lands() -> None:
    filter_ = SequenceWatermarks(10)
    assert [filter_.seen("p", n) for n in (1, 2, 4, 5)] == [False] * 4
    assert filter_.seen("p", 2)  # PutRecords retried 2 after 4 and 5 landed
    assert not filter_.seen("p", 3)  # the gap, filled late: a new number
    assert filter_.seen("p", 3)
    assert not filter_.seen("q", 2)  # another producer's 2
    assert not filter_.seen("p", 5 + WINDOW + 1)  # a jump: the window moves
    assert not filter_.seen("p", 5)  # now too old to judge: lands
    with pytest.raises(ValueError, match="at least 1"):
        SequenceWatermarks(0)


@pytest.mark.parametrize(
    ("payload", "number"),
    [
        (b'{"meta": {"seq": 17}}', 17),
        (b'{"meta": {"seq": "17"}}', 17),
        (b'{"meta": {"seq": -3}}', -3),
        (b'{"meta": {"seq": 1.5}}', None),
        (b'{"meta": {"seq": "x"}}', None),
        (b'{"meta": {"seq": null}}', None),
        (b'{"meta": {}}', None),
        (b'{"meta": {"seq": "\xd9\xa3"}}', None),  # Arabic-Indic digit: not a number here
        (b"not json", None),
    ],
)
def test_the_number_is_an_integer_or_digits(payload: bytes, number: int | None) -> None:
    assert NumberPointer("/meta/seq").number(payload) == number
