"""Wake-ups (consumer.leases.wake): the alarm that cuts a beat's sleep short, the HTTP
request that rings it on a real server over loopback, and the address a worker gives."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
import structlog

from consumer.leases.wake import (
    MIN_GAP,
    WAKE_BURST,
    WAKE_RATE,
    Alarm,
    Waker,
    advertised_host,
    join_address,
    send_wake,
    split_address,
)
from consumer.lifecycle.health import HealthServer
from consumer.lifecycle.worker import Health
from consumer.metrics import LanderMetrics


async def _timed(alarm: Alarm, seconds: float) -> float:
    started = time.monotonic()
    await alarm.sleep(seconds)
    return time.monotonic() - started


async def test_an_alarm_sleeps_its_time_unless_rung() -> None:
    alarm = Alarm()
    assert await _timed(alarm, 0.3) >= 0.29
    asyncio.get_running_loop().call_later(0.05, alarm.ring)
    assert await _timed(alarm, 5) < 1


async def test_a_ring_before_the_sleep_is_not_lost_and_rings_coalesce() -> None:
    """A wake-up that arrives during a beat ends the next sleep; ten rings make one
    early wake, not ten, and never a sleep below the minimum gap."""
    alarm = Alarm()
    for _ in range(10):
        alarm.ring()
    elapsed = await _timed(alarm, 5)
    assert MIN_GAP * 0.9 <= elapsed < 1
    assert await _timed(alarm, 0.3) >= 0.29  # the rings were used up
    assert alarm.rung == 10


def _health() -> Health:
    return Health(alive=True, ready=True)


async def test_a_wake_request_rings_the_server_callback() -> None:
    woken: list[int] = []
    server = HealthServer(LanderMetrics(), _health, "127.0.0.1", 0, wake=lambda: woken.append(1))
    port = await server.start()
    try:
        assert await send_wake(join_address("127.0.0.1", port))
        assert woken == [1]
    finally:
        await server.stop()


async def test_a_wake_that_cannot_arrive_is_false_not_an_error() -> None:
    """A closed port, a server that takes no wake-ups, a malformed address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert not await send_wake(f"127.0.0.1:{closed}")
    server = HealthServer(LanderMetrics(), _health, "127.0.0.1", 0)
    port = await server.start()
    try:
        assert not await send_wake(f"127.0.0.1:{port}")
    finally:
        await server.stop()
    assert not await send_wake("no-port-here")
    assert not await send_wake("127.0.0.1:notaport")


def test_the_wake_endpoint_takes_only_post() -> None:
    woken: list[int] = []
    server = HealthServer(LanderMetrics(), _health, "127.0.0.1", 0, wake=lambda: woken.append(1))
    assert server.respond("GET", "/wake")[0] == 405
    assert woken == []
    assert server.respond("POST", "/wake")[0] == 202
    assert woken == [1]
    assert server.respond("POST", "/metrics")[0] == 405


async def test_a_waker_counts_and_warns_once_per_unreachable_address() -> None:
    metrics = LanderMetrics()
    waker = Waker("w1", metrics)
    answers = {"up:1": True, "down:1": False}

    async def transport(address: str) -> bool:
        return answers[address]

    waker.transport = transport
    with structlog.testing.capture_logs() as logs:
        for address in ("up:1", "down:1", "down:1"):
            waker.send("w2", address)
        for _ in range(20):
            await asyncio.sleep(0)
    await waker.close()
    assert (waker.sent, waker.failed) == (1, 2)
    assert metrics.value("lander_board_wakeups", outcome="failed") == 2
    assert [entry["address"] for entry in logs if entry["log_level"] == "warning"] == ["down:1"]


def test_addresses_round_trip_with_ipv6_in_brackets() -> None:
    assert join_address("10.0.0.1", 9100) == "10.0.0.1:9100"
    assert join_address("::1", 9100) == "[::1]:9100"
    assert split_address("[::1]:9100") == ("::1", 9100)
    assert split_address("pod.local:80") == ("pod.local", 80)
    with pytest.raises(ValueError, match="host:port"):
        split_address(":80")


def test_the_advertised_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """off: none; a name: itself; auto: the bind address when it is specific, else what
    the host name resolves to (None if nothing)."""
    assert advertised_host("off", "0.0.0.0") is None
    assert advertised_host("pod-7.lander", "0.0.0.0") == "pod-7.lander"
    assert advertised_host("auto", "127.0.0.1") == "127.0.0.1"
    monkeypatch.setattr(socket, "gethostbyname", lambda _name: "10.1.2.3")
    assert advertised_host("auto", "0.0.0.0") == "10.1.2.3"

    def unresolvable(_name: str) -> str:
        raise socket.gaierror("no such host")

    monkeypatch.setattr(socket, "gethostbyname", unresolvable)
    assert advertised_host("auto", "::") is None


async def test_a_wake_up_that_comes_with_a_cancellation_does_not_swallow_it() -> None:
    """Shutdown cancels the beat loop; a wake-up in the same moment must not win
    (asyncio.wait_for on 3.11 returns the event and drops the cancellation, so the
    loop, and the worker's shutdown, would never end)."""
    for _ in range(20):
        alarm = Alarm()
        sleeping = asyncio.create_task(alarm.sleep(10))
        await asyncio.sleep(0)
        alarm.ring()
        await asyncio.sleep(0)  # the event's waiter is done; the sleep has not resumed
        sleeping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sleeping


async def test_wake_ups_beyond_the_budget_are_refused_until_it_refills() -> None:
    """The endpoint takes no credentials: whoever reaches it gets a burst of early
    beats, then one a second; the rest are refused (the worker beats on its own time)."""
    now = [0.0]
    alarm = Alarm(clock=lambda: now[0])

    async def flood(times: int) -> list[bool]:
        accepted = []
        for _ in range(times):
            accepted.append(alarm.ring())
            await alarm.sleep(0.0)  # the beat it caused, or the next one
        return accepted

    assert await flood(WAKE_BURST + 3) == [True] * WAKE_BURST + [False] * 3
    assert alarm.refused == 3
    now[0] += 2.0 / WAKE_RATE
    assert await flood(3) == [True, True, False]
    now[0] += 1.0 / WAKE_RATE
    assert alarm.ring()
    assert alarm.ring()  # before the sleep: coalesced with the first, no token spent
    await alarm.sleep(0.0)
    assert not alarm.ring()  # the one token was spent once, by both rings
