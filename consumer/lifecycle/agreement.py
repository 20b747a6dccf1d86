"""Workers agree on how each stream lands, or say so (:mod:`consumer.landing.fingerprint`).

At start, for each stream it lands, a worker reads the stream's landing record in the
lease table. No record: it writes its own (conditionally: of two workers starting at
once, one writes and the other compares with it). The same landing: it goes on.
Another landing: it refuses to start (:class:`LandingDiffersError`, exit 3, one line
naming what differs), unless ``LANDER_LANDING_ADOPT`` names its digest, when it
replaces the record: a change on purpose, rolled out with the new settings.

While it runs, every ``LANDER_LANDING_CHECK_SECONDS`` (jittered) a worker reads its
streams' records again (one eventually consistent GetItem each: a fleet of 1,000
workers reads each record 17 times a second, 8 read units). When one names another
landing (newer workers adopted a change), it gives every shard back and takes none
(:meth:`~consumer.lifecycle.fitness.Fitness.supersede`): from then on only workers with
the new settings land, and this one waits, not ready, to be replaced. A record that is
gone (the lease table was deleted) is written again.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import structlog

from consumer.config import Settings
from consumer.errors import RefusedError
from consumer.landing.fingerprint import Landing, Verdict, differences, judge
from consumer.leases.model import LandingRecord, LeaseError, wall_ms
from consumer.leases.store import LeaseStore, TableMissingError
from consumer.lifecycle.fitness import Fitness

log = structlog.get_logger("consumer.lifecycle.agreement")

WATCH_SECONDS = 60.0
"""LANDER_LANDING_CHECK_SECONDS' default."""
RACES = 3
"""Conditional writes lost to other workers before start-up gives up."""
DOCS = "docs/operations.md#changing-how-a-stream-lands"


class LandingDiffersError(RefusedError):
    """The fleet lands a stream otherwise than this worker would (exit 3)."""


def landing_of(settings: Settings) -> Landing:
    """How a worker with these (one stream's) settings lands."""
    return Landing(
        archive=settings.archive,
        payload_format=settings.payload_format,
        event_id_pointer=settings.event_id_pointer,
    )


@dataclass(frozen=True, slots=True)
class Settled:
    """One stream's landing at start: a line for ``lander run --check``, and what
    start-up wrote (or, checking, would write) in the lease table."""

    line: str
    change: str | None = None


def _against(stream: str, ours: Landing, record: LandingRecord) -> str:
    """What differs between ours and the record, for one line."""
    theirs = Landing.parse(record.settings)
    what = (
        "; ".join(differences(ours, theirs))
        if theirs is not None
        else f"the fleet's landing is {record.digest} (from a release this one cannot read)"
    )
    return f"stream {stream} lands otherwise in this worker than in the fleet ({what})"


class Agreement:
    """This worker's landing of each of its streams, held against the fleet's records."""

    def __init__(self, store: LeaseStore, worker: str, adopt: frozenset[str]) -> None:
        self.store = store
        self.worker = worker
        self.adopt = adopt
        self.landings: dict[str, Landing] = {}
        """The streams settled so far, and how this worker lands each."""

    async def settle(self, stream: str, ours: Landing, *, check_only: bool = False) -> Settled:
        """Agree with, record or adopt ``stream``'s record, or raise LandingDiffersError.
        With ``check_only`` nothing is written (a missing table reads as no record)."""
        for _ in range(RACES):
            try:
                record = await self.store.read_landing(stream)
            except TableMissingError:
                if not check_only:
                    # Deleted since start-up created it: created again, as the
                    # running workers do (they read from the initial position).
                    await self.store.ensure_table()
                    continue
                record = None
            verdict = judge(ours, None if record is None else record.digest, self.adopt)
            line = f"{stream}: landing {ours.digest} ({ours.describe()})"
            if verdict is Verdict.AGREE:
                self.landings[stream] = ours
                return Settled(f"{line}, as the fleet's")
            if verdict is Verdict.REFUSE:
                assert record is not None
                raise LandingDiffersError(
                    f"{_against(stream, ours, record)}; to change it on purpose, roll out "
                    f"with LANDER_LANDING_ADOPT={ours.digest} ({DOCS})"
                )
            change = (
                f"record the landing of stream {stream}"
                if record is None
                else f"adopt landing {ours.digest} for stream {stream} in place of {record.digest}"
            )
            if check_only:
                return Settled(line, change)
            written = LandingRecord(ours.digest, ours.canonical, self.worker, wall_ms())
            replacing = None if record is None else record.digest
            try:
                recorded = await self.store.record_landing(stream, written, replacing=replacing)
            except TableMissingError:
                continue  # deleted between the read and the write: read again
            if recorded:
                self.landings[stream] = ours
                if record is not None:
                    log.warning(
                        "adopted a new landing for the fleet (LANDER_LANDING_ADOPT): workers "
                        "with the old one give their shards back",
                        stream=stream,
                        landing=ours.digest,
                        replaced=record.digest,
                        was_written_by=record.worker,
                    )
                return Settled(line, change)
        raise RefusedError(
            f"could not record the landing of stream {stream}: other workers kept writing it"
        )

    async def watch(self, fitness: Fitness, interval: float = WATCH_SECONDS) -> None:
        """Every ``interval`` (jittered), hold the records against this worker's
        landings: supersede it while one differs. Runs until cancelled."""
        while True:
            await asyncio.sleep(interval * random.uniform(0.8, 1.2))
            try:
                reason = await self._differs(adopt_gone=fitness.unfit is None)
            except (LeaseError, OSError) as exc:
                log.warning("cannot read the landing records; checking later", error=str(exc))
                continue
            fitness.supersede(reason)

    async def _differs(self, *, adopt_gone: bool) -> str | None:
        """Why the fleet lands a stream otherwise (None: it agrees on every one); a
        record that is gone is written again when ``adopt_gone``."""
        for stream, ours in list(self.landings.items()):
            try:
                record = await self.store.read_landing(stream, consistent=False)
            except TableMissingError:
                continue  # the workers create it again; the next round writes the record
            if record is None:
                if adopt_gone:
                    mine = LandingRecord(ours.digest, ours.canonical, self.worker, wall_ms())
                    await self.store.record_landing(stream, mine, replacing=None)
                continue
            if record.digest != ours.digest:
                return (
                    f"{_against(stream, ours, record)}: worker {record.worker} wrote landing "
                    f"{record.digest}; restart this one with the fleet's settings"
                )
        return None
