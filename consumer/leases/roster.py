"""The workers table as one worker last read it, each slot's counter watched on that
worker's monotonic clock (:mod:`.board`).

The coordinator, the leader, the hand-offs and the wake-ups all judge the fleet from
the same read: :class:`Roster` owns it, and each of them asks it, so no part keeps a
copy that another part's read would leave stale.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from consumer.leases.board import Board, line, to_fence, watch
from consumer.leases.decisions import Seen
from consumer.leases.store import BoardStore


class Roster:
    """The last read of the workers table, with what was seen of each slot and when."""

    def __init__(self, store: BoardStore, clock: Callable[[], float], failover: float) -> None:
        self._store = store
        self._clock = clock
        self._failover = failover
        self._board = Board()
        self._seen: dict[str, Seen] = {}

    @property
    def board(self) -> Board:
        """The workers table as last read (an immutable value)."""
        return self._board

    @property
    def seen(self) -> Mapping[str, Seen]:
        """Each slot's counter, and since when this worker has seen it unchanged."""
        return self._seen

    async def read(self) -> Board:
        """Read the workers table (one eventually consistent Scan) and watch it."""
        board = await self._store.read_board()
        self.accept(board)
        return board

    def accept(self, board: Board) -> None:
        """Take ``board`` as the latest read, watching each slot's counter from now."""
        self._board = board
        self._seen = watch(self._seen, board, self._clock())

    def mark_fenced(self, worker: str) -> None:
        """The leader fenced ``worker``'s slot: no one may count on it any more."""
        slots = dict(self._board.slots)
        if worker in slots:
            slots[worker] = replace(slots[worker], fenced=True)
            self._board = replace(self._board, slots=slots)

    def line(self) -> list[str]:
        """The live workers in join order (:func:`.board.line`), as of now."""
        return line(self._board, self._seen, self._clock(), self._failover)

    def receivers(self, me: str) -> list[str]:
        """The live workers other than ``me`` that are not leaving, in join order."""
        slots = self._board.slots
        return [worker for worker in self.line() if worker != me and not slots[worker].leaving]

    def to_fence(self) -> list[str]:
        """The workers whose slots stood still for the failover time (:func:`.board.to_fence`)."""
        return to_fence(self._board, self._seen, self._clock(), self._failover)

    def next_expiry(self, me: str) -> float | None:
        """When the first other live slot would expire if it stays still (None: none)."""
        slots = self._board.slots
        due = [
            seen.since + self._failover
            for worker, seen in self._seen.items()
            if worker != me
            and worker in slots
            and not slots[worker].fenced
            and seen.counter == slots[worker].counter
        ]
        return min(due) if due else None
