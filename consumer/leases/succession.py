"""Who leads: the leader item, held like a lease (:mod:`.board`).

The leader renews the leader item every second (a write conditioned on it still
leading at the counter it last wrote), naming its deputy in it. The deputy reads the
item every second; every other worker reads it every :data:`~.board.WATCH_SECONDS`,
and every second until it has seen a leader alive (a worker that just joined a fleet
whose leader died). A reader whose item's counter stood still for the failover time
on its monotonic clock takes the item over with a write conditioned on that counter
(:func:`~.board.lead_decision`): one taker wins, and never over a leader that renewed.
A worker leads only within ``stale_after`` (less than the failover time) of the start
of its last successful write of the item, so by the time another can take it, it has
stopped. A leader that stops deletes the item, and the next reader claims it at once.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from consumer.leases.board import LEAD_SECONDS, WATCH_SECONDS, Leadership, lead_decision
from consumer.leases.decisions import Seen
from consumer.leases.store import BoardStore

log = structlog.get_logger("consumer.leases")


class Succession:
    """One worker's view of the leader item, and its part in keeping one leader."""

    def __init__(
        self,
        store: BoardStore,
        worker_id: str,
        failover: float,
        stale_after: float,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._worker_id = worker_id
        self._failover = failover
        self._stale_after = stale_after
        self._clock = clock
        self._log = log.bind(worker_id=worker_id)
        self.leadership: Leadership | None = None
        """The leader item as last read or written."""
        self._seen: Seen | None = None
        self._held_since: float | None = None
        """When this worker's last successful write of the item started."""
        self._next_read = 0.0
        self._alive_seen = False
        """Whether this worker has seen the leader item's counter move (or led)."""

    @property
    def leader(self) -> str | None:
        """Who leads, as far as this worker knows."""
        return None if self.leadership is None else self.leadership.leader

    def leads(self) -> bool:
        """Whether this worker leads and may act as leader now."""
        return (
            self.leader == self._worker_id
            and self._held_since is not None
            and self._clock() - self._held_since < self._stale_after
        )

    def is_deputy(self) -> bool:
        """Whether the leader named this worker its deputy (as last read)."""
        return self.leadership is not None and self.leadership.deputy == self._worker_id

    async def step(
        self, address: str | None, deputy: Callable[[], str | None], may_claim: bool = True
    ) -> str | None:
        """Renew the item if this worker leads; else read it when due and (``may_claim``:
        not a stopping worker) claim it if it is free or stood still for the failover
        time. ``deputy`` names the deputy (the leader's choice, from its last read of
        the workers table). Returns a newly named deputy, for the caller to tell (it
        reads the item at its next notice)."""
        now = self._clock()
        if self.leader == self._worker_id and self.leadership is not None:
            named = deputy()
            renewed = await self._store.renew_leadership(
                self._worker_id, self.leadership.counter, deputy=named, address=address
            )
            if renewed is not None:
                told = named if named != self.leadership.deputy else None
                self.leadership, self._held_since = renewed, now
                return told
            self._log.warning("leadership lost: the leader item was taken")
            self.leadership, self._held_since, self._seen = None, None, None
        elif now < self._next_read or not may_claim:
            return None
        await self.watch(address)
        return None

    def read_soon(self) -> None:
        """Read the item at the next step (a notice came: perhaps this worker was named
        deputy)."""
        self._next_read = 0.0

    async def watch(self, address: str | None) -> None:
        """Read the leader item now, and claim it if :func:`lead_decision` says so."""
        now = self._clock()
        read = await self._store.read_leadership()
        if read is not None and (self._seen is None or self._seen.counter != read.counter):
            self._alive_seen = self._alive_seen or self._seen is not None
            self._seen = Seen(read.counter, now)
        self.leadership = read
        decision = lead_decision(read, self._worker_id, self._seen, now, self._failover)
        if decision == "claim":
            counter = None if read is None else read.counter
            started = self._clock()
            taken = await self._store.claim_leadership(self._worker_id, counter, address)
            if taken is not None:
                self._log.info("leading", previous=None if read is None else read.leader)
                self.leadership, self._held_since, self._alive_seen = taken, started, True
                return
            self._seen = None  # someone else won: read it again soon
        elif decision == "lead" and self._held_since is None:
            # The item names this worker, but no write of this process holds it (a
            # restart under the same worker id): take it over at its counter.
            assert read is not None
            started = self._clock()
            taken = await self._store.claim_leadership(self._worker_id, read.counter, address)
            if taken is not None:
                self.leadership, self._held_since = taken, started
                return
        # Every second as deputy, or while nobody is deputy: a leader that died
        # before naming one is taken over at the failover time, not WATCH_SECONDS on.
        often = self.is_deputy() or not self._alive_seen or read is None or read.deputy is None
        self._next_read = now + (LEAD_SECONDS if often else WATCH_SECONDS)

    async def resign(self) -> None:
        """Delete the item if this worker leads (a graceful stop)."""
        leadership = self.leadership
        if (
            leadership is not None
            and leadership.leader == self._worker_id
            and await self._store.resign_leadership(self._worker_id, leadership.counter)
        ):
            self._log.info("leadership given up")
        self.leadership, self._held_since = None, None
