"""Wake-ups: telling another worker to beat now (board coordination).

A worker learns what others ask of it (a lease given or handed to it, the
acknowledgement of a hand-off it waits for, a lease released for the leader to place)
from its next beat, every renew interval. So a graceful hand-off used to wait for the
receiver's beat.

A worker that serves its metrics port writes the address others reach it at on its
slot (``LANDER_ADVERTISE_HOST``). Whoever appends to its incoming list or bumps its
notices then also sends it ``POST /wake``, and it beats at once. A wake-up carries
nothing: the woken worker beats and reads what its slot says, so a wake-up that is
lost, late, repeated or forged costs at most one beat, never a decision. Wake-ups are
best effort: one that does not arrive (no address, a network policy, a timeout) leaves
the worker to its next beat, as without them. A worker beats on wake-ups at most every
:data:`MIN_GAP` seconds and, sustained, once a second (a token bucket): the endpoint
takes no credentials, so that bounds what anyone who reaches the port can add to the
board's writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from consumer.aio import wait_event

if TYPE_CHECKING:
    from consumer.leases.board import Board, Leadership
    from consumer.leases.store import BoardStore
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.leases")

WAKE_PATH = "/wake"
SEND_TIMEOUT = 0.5
"""Seconds a wake-up may take (connect, send, status line) before it is given up."""
MIN_GAP = 0.05
"""The shortest time between two beats a worker makes on wake-ups."""
WAKE_BURST = 6
"""Beats a worker makes early on wake-ups in a burst (a hand-off takes two or three)."""
WAKE_RATE = 1.0
"""Early beats a second, sustained: the wake endpoint is not authenticated, so this
bounds what a caller on the network can add to the board's writes."""
_ANY_ADDRESS = ("", "0.0.0.0", "::")


class Alarm:
    """The receiving side: the beat loop's sleep, cut short by a wake-up."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self._event = asyncio.Event()
        # Looked up now, not at import: a simulation's clock (bench/virtual_time.py) holds.
        self._clock = clock or time.monotonic
        self.rung = 0
        """Wake-ups received (for tests and metrics)."""
        self.refused = 0
        """Wake-ups past the budget: the worker beats at its own time instead."""
        self._tokens = float(WAKE_BURST)
        self._refilled = self._clock()

    def ring(self) -> bool:
        """A wake-up arrived: the current or next sleep ends (several coalesce). Each
        early end spends one of :data:`WAKE_BURST` tokens, refilled at
        :data:`WAKE_RATE` a second, so wake-ups from anyone who can reach the port cost
        at most that many extra beats; False when refused."""
        self.rung += 1
        if self._event.is_set():
            return True  # coalesced with one already accepted
        now = self._clock()
        self._tokens = min(float(WAKE_BURST), self._tokens + (now - self._refilled) * WAKE_RATE)
        self._refilled = now
        if self._tokens < 1.0:
            self.refused += 1
            return False
        self._tokens -= 1.0
        self._event.set()
        return True

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or until rung, but at least :data:`MIN_GAP`. A ring during
        the pass before the sleep ends it too, so no wake-up is lost."""
        started = self._clock()
        # A cancellation that comes with a ring (a wake-up during shutdown) is kept, or
        # the beat loop would never end (consumer.aio).
        await wait_event(self._event, seconds)
        self._event.clear()
        rest = min(MIN_GAP, seconds) - (self._clock() - started)
        if rest > 0:
            await asyncio.sleep(rest)


class Waker:
    """The sending side: wake-ups go out on their own tasks, never awaited by the
    sender, so a slow or unreachable peer delays nothing."""

    def __init__(self, worker_id: str, metrics: LanderMetrics | None = None) -> None:
        self.worker_id = worker_id
        self.metrics = metrics
        self.sent = 0
        self.failed = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._warned: set[str] = set()
        self.transport: Callable[[str], Awaitable[bool]] = send_wake
        """Delivers one wake-up to an address (HTTP; a simulation passes its own)."""

    def send(self, worker: str, address: str) -> None:
        """Wake ``worker`` at ``address`` (host:port), in the background."""
        task = asyncio.create_task(self._send(worker, address))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, worker: str, address: str) -> None:
        ok = await self.transport(address)
        if self.metrics is not None:
            self.metrics.wakeups.labels("sent" if ok else "failed").inc()
        if ok:
            self.sent += 1
            return
        self.failed += 1
        if address not in self._warned:  # once per address: a blocked port stays blocked
            self._warned.add(address)
            log.warning(
                "wake-up did not arrive; that worker acts at its next beat instead",
                worker_id=self.worker_id,
                to=worker,
                address=address,
            )

    async def close(self) -> None:
        """Cancel wake-ups still under way."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Courier:
    """Telling another worker something: a conditional write to its slot, then a
    wake-up at its address, where it gave one."""

    def __init__(
        self,
        store: BoardStore,
        worker_id: str,
        addresses: Callable[[str], str | None],
        metrics: LanderMetrics | None = None,
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self._addresses = addresses
        self.waker = Waker(worker_id, metrics)

    async def deliver(self, worker: str, keys: list[str]) -> None:
        """Append lease keys to a worker's incoming list, and wake it."""
        await self._store.deliver(worker, keys)
        self.wake(worker)

    async def notify(self, worker: str) -> None:
        """Have a worker read its own leases again, and wake it (at the address the
        write returned)."""
        slot = await self._store.notify(worker)
        if worker != self._worker_id and slot is not None and slot.address is not None:
            self.waker.send(worker, slot.address)

    def wake(self, worker: str) -> None:
        """Wake a worker whose address is known; the others beat anyway."""
        address = self._addresses(worker)
        if worker != self._worker_id and address is not None:
            self.waker.send(worker, address)

    async def close(self) -> None:
        """Cancel wake-ups still under way."""
        await self.waker.close()


async def send_wake(address: str) -> bool:
    """``POST /wake`` to a worker's metrics port; True if it answered 202."""
    try:
        host, port = split_address(address)
        async with asyncio.timeout(SEND_TIMEOUT):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(
                    f"POST {WAKE_PATH} HTTP/1.1\r\nHost: {address}\r\n"
                    "Content-Length: 0\r\nConnection: close\r\n\r\n".encode("latin-1")
                )
                await writer.drain()
                status = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError, ValueError, UnicodeError):
        return False
    return status.split()[1:2] == [b"202"]


def address_of(board: Board, leadership: Leadership | None, worker: str) -> str | None:
    """Where ``worker`` is woken: its slot's address, or the leader item's for a
    leader whose slot is not on ``board``."""
    slot = board.slots.get(worker)
    if slot is None and leadership is not None and leadership.leader == worker:
        return leadership.address
    return None if slot is None else slot.address


def join_address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_address(address: str) -> tuple[str, int]:
    """The host and port of a ``host:port`` (ValueError if it is not one)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        raise ValueError(f"not host:port: {address!r}")
    return host.strip("[]"), int(port)


def advertised_host(setting: str, bind_host: str) -> str | None:
    """The host other workers wake this one at: ``setting`` itself, None for ``off``;
    for ``auto``, the metrics server's bind address when it is a specific one, else the
    address this machine's host name resolves to (a pod's or task's own IP on
    Kubernetes and ECS), None if it resolves to nothing."""
    if setting == "off":
        return None
    if setting != "auto":
        return setting
    if bind_host not in _ANY_ADDRESS:
        return bind_host
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return None
