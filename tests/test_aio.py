"""Waiting with a deadline: a cancellation that comes as the event is set is kept."""

from __future__ import annotations

import asyncio

import pytest

from consumer.aio import stop_task, wait_event


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


async def _producer(queue: asyncio.Queue[int], cleaned: list[str], lose_first: bool) -> None:
    """Fills the queue for ever; loses its first cancellation if told to."""
    lost = False
    try:
        while True:
            try:
                await queue.put(1)
            except asyncio.CancelledError:
                if not lose_first or lost:
                    raise
                lost = True  # as 3.11's wait_for does: the cancellation is dropped
    finally:
        await asyncio.sleep(0.2)  # a clean-up that takes a while (closing a connection)
        cleaned.append("closed")


@pytest.mark.parametrize("lose_first", [False, True])
async def test_stop_task_ends_a_producer_blocked_on_a_full_queue(lose_first: bool) -> None:
    """Nobody reads the queue any more: the producer is ended anyway, its clean-up runs
    to the end (not cut by the cancellation sent again), and one lost cancellation
    costs the grace, not for ever."""
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
    cleaned: list[str] = []
    task = asyncio.create_task(_producer(queue, cleaned, lose_first))
    await asyncio.sleep(0.01)
    assert queue.full()
    async with asyncio.timeout(10):
        await stop_task(task, queue, again=0.5)
    assert task.done()
    assert cleaned == ["closed"]


async def test_a_caller_cancelled_while_stopping_cancels_the_task_too() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
    cleaned: list[str] = []
    task = asyncio.create_task(_producer(queue, cleaned, lose_first=True))
    await asyncio.sleep(0.01)
    stopping = asyncio.create_task(stop_task(task, queue, again=60))
    await asyncio.sleep(0.1)
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    async with asyncio.timeout(10):
        await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
