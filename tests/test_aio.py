"""Waiting with a deadline: a cancellation that comes as the event is set is kept."""

from __future__ import annotations

import asyncio

import pytest

from consumer.aio import wait_event


async def test_wait_event_says_whether_the_event_came() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 10) is True


async def test_a_cancellation_that_comes_with_the_event_propagates() -> None:
    """The event is set, then the waiting task cancelled before it resumes: the task
    ends cancelled (3.11's wait_for would return, and a loop around it run on)."""
    for _ in range(20):
        event = asyncio.Event()
        waiting = asyncio.create_task(wait_event(event, 10))
        await asyncio.sleep(0)
        event.set()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
