"""The chaos run with a processor of side effects (``python -m tests.chaos --effects
keyed|plain``): issue 47's check of :mod:`consumer.effects` under the same chaos.

The workers run :class:`tests.support.effects_processor.EffectsProcessor` instead of the
lander: each event's effect is a call, under its event id, to a loopback side-effect
server (:mod:`tests.chaos.sideeffects`) that counts per key every call and every effect
it applied. With ``keyed`` the server honours ``Idempotency-Key`` and the processor
runs :attr:`Mode.KEYED`; with ``plain`` it applies every call and the processor runs
:attr:`Mode.AT_MOST_ONCE`. The chaos is the lander run's (kill -9, SIGSTOP past
failover, SIGTERM, joins, a split and a merge, the lease items deleted, faults on
every AWS call, the effects table's writes included), but for the misconfigured
worker: here it is given an address of the downstream that goes away right after its
start-up checks (its effects are refused: :class:`EffectNotDone`), where the lander's
has its bucket deleted.

At the end the run checks, without the project's code: the server's counts, the
effects table read straight with boto3, and the workers' logs.

- keyed: every produced event id applied exactly once, every record COMPLETED;
- plain: no event id applied twice; every one either applied once and COMPLETED, or
  recorded UNKNOWN (applied 0 or 1 times), and every UNKNOWN key was reported by a
  worker (logged "effect outcome unknown"); the unknown ones are counted in the
  summary.

In both, every bad payload (no event id) was skipped with a warning, and nothing the
producer did not write was applied. One stream only: the three-stream run's deletion
waits for the archive.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consumer.cli.harness import Say, WorkerProcess
from tests.chaos.proxy import FaultProxy
from tests.chaos.scenario import SHORT, Chaos, Outcome, Profile, wait_for_checks
from tests.chaos.sideeffects import Behaviour, SideEffectServer
from tests.support import effects_processor as processor

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MODES: dict[Behaviour, str] = {"keyed": "keyed", "plain": "at-most-once"}
"""The processor's mode for each server behaviour."""
UNKNOWN_LOGGED = "effect outcome unknown"
NO_KEY_LOGGED = "record without an event id"
EFFECTS_SHORT = replace(SHORT, seconds=40, rate=15, catch_up_seconds=480)
"""The short profile cut to 600 events (40 s at 15/s), every kind of event kept (and
fired after production when those that block held it up): each event costs a read
and two transactions on the serialised DynamoDB emulator, whose faults also hold the
shard's lease lock, so the workers get through only a few events a second on 2 cores."""
CONFIRM_EVERY = 10.0
"""Seconds between scans of the effects table while the counts say every event is done."""


@dataclass
class EffectsOutcome(Outcome):
    """The lander run's outcome, checked by the effects instead of the archive."""

    behaviour: str = "keyed"
    calls: int = 0
    """Calls the downstream got (a keyed server answers a repeated key unapplied)."""
    applied: int = 0
    """Event ids applied downstream at least once."""
    duplicates: int = 0
    """Event ids applied more than once."""
    unknown: int = 0
    """Event ids recorded UNKNOWN in the effects table."""
    unknown_applied: int = 0
    """Of those, applied downstream (once): the effect did happen."""
    unreported: int = 0
    """UNKNOWN event ids that no worker logged as unknown."""
    reported: int = 0
    """Distinct event ids the workers logged as unknown."""
    unsettled: int = 0
    """Event ids neither applied and COMPLETED nor UNKNOWN: effects lost."""
    completed_unapplied: int = 0
    """COMPLETED in the table, never applied downstream (a done that did not happen)."""
    table: dict[str, int] = field(default_factory=dict)
    """Effect records by state."""
    skipped: int = 0
    """Records skipped without an event id (their positions, from the warnings)."""
    unkeyed_calls: int = 0

    @property
    def ok(self) -> bool:
        """keyed: exactly once; plain: at most once, every unknown one reported."""
        p = self.produced
        common = (
            p is not None
            and self.unsettled == 0
            and self.duplicates == 0
            and self.unexpected == 0
            and self.completed_unapplied == 0
            and self.unreported == 0
            and self.unkeyed_calls == 0
            and self.skipped == p.bad
            and self.table.get("IN_PROGRESS", 0) == 0
            and all(code in (0, 3) for code in self.misconfigured_exits.values())
        )
        if self.behaviour == "keyed":
            return common and self.unknown == 0 and p is not None and self.applied == p.events
        return common

    def report(self) -> str:
        """The lander report's lines, with the effects' counts for the archive's."""
        p = self.produced
        events = p.events if p else 0
        lines = super().report().splitlines()
        lines[0] = (
            f"chaos effects-{self.behaviour} {self.profile} seed={self.seed}: "
            f"{'OK' if self.ok else 'FAILED'} in {self.seconds:.0f} s: {events:,} events, "
            f"applied {self.applied:,}, unknown {self.unknown}, duplicates "
            f"{self.duplicates} (replay: python -m tests.chaos --profile {self.profile} "
            f"--seed {self.seed}{self.replay_flags})"
        )
        effects = [
            f"  effects       {self.calls:,} calls, {self.applied:,} event ids applied, "
            f"{self.duplicates} twice or more, {self.unexpected} not produced; unsettled "
            f"{self.unsettled}, done but not applied {self.completed_unapplied}",
            f"  unknown       {self.unknown} recorded (of them applied {self.unknown_applied}), "
            f"{self.reported} reported by the workers, unreported {self.unreported}",
            "  table         "
            + ", ".join(f"{state} {n:,}" for state, n in sorted(self.table.items()))
            + f"; no-key records skipped {self.skipped}/{p.bad if p else 0}",
        ]
        # The archive and compaction lines (2 and 3) say nothing here.
        return "\n".join([lines[0], lines[1], *effects, *lines[4:]])


class EffectsChaos(Chaos):
    """The chaos run with the effects processor and its downstream."""

    every_event = True

    def __init__(
        self,
        profile: Profile,
        seed: int,
        workdir: Path,
        behaviour: Behaviour,
        say: Say | None = None,
    ) -> None:
        if profile.streams != 1:
            raise ValueError("the effects run reads one stream (--streams 1)")
        super().__init__(profile, seed, workdir, say)
        self.behaviour = behaviour
        self.server = SideEffectServer(behaviour)
        self.outcome = EffectsOutcome(seed, profile.name, behaviour=behaviour)
        self.outcome.replay_flags += f" --effects {behaviour}"
        if profile.read_mode != "polling":
            self.outcome.replay_flags += f" --read-mode {profile.read_mode}"
        self.effects_table = f"{self.table}-effects"
        self._doors: list[SideEffectServer] = []

    def run(self, spark: SparkSession | None = None) -> Outcome:
        """The lander's run, with the side-effect server up throughout."""
        self.say(f"effects {self.behaviour}: downstream at {self.server.url}")
        with self.server:
            try:
                return super().run(spark)
            finally:
                for door in self._doors:
                    door.stop()

    def _worker_env(self, env: dict[str, str], proxies: list[FaultProxy]) -> dict[str, str]:
        worker_env = super()._worker_env(env, proxies)
        del worker_env["LANDER_ARCHIVE"]  # a processor of its own: no archive
        return {
            **worker_env,
            "LANDER_PROCESSOR": "tests.support.effects_processor:EffectsProcessor",
            processor.URL: self.server.url,
            processor.MODE: MODES[self.behaviour],
        }

    def _misconfigured(self) -> str:
        """A worker joins whose address of the downstream stops answering right after
        its start-up checks: its effects are refused (EffectNotDone), its probe fails,
        it must give its shards back and take no more; or, when the faults fail its
        checks, it is refused at start (exit 3). Either way it ends with 0 or 3."""
        name = f"bad{len(self.misconfigured) + 1}"
        door = SideEffectServer(ledger=self.server.ledger).start()
        self._doors.append(door)
        env = {**self.worker_env, "LANDER_WORKER_ID": f"chaos-{name}", processor.URL: door.url}
        worker = WorkerProcess(name, env, self.workdir / "logs" / f"{name}.log")
        self.misconfigured.append(worker)
        wait_for_checks(worker)
        door.stop()
        if not worker.alive():
            code = worker.proc.returncode
            self.outcome.misconfigured_exits[name] = code
            return f"{name} (downstream gone) refused at start, exit {code}"
        return f"{name} joined; its downstream went away after its start-up checks"

    # -- after -----------------------------------------------------------------------

    def _wanted(self) -> set[str]:
        produced = self.streams[0].produced
        return produced.event_ids() if produced is not None else set()

    def _catch_up(self) -> None:
        """Wait until every produced event's effect is COMPLETED or UNKNOWN in the
        table. A scan of the table holds the serialised emulator for a second or two
        (lease renewals wait behind it), so the wait reads the server's counts and the
        workers' logs, and scans only to confirm, once they account for every event."""
        wanted = self._wanted()
        deadline = time.monotonic() + self.profile.catch_up_seconds
        next_scan = 0.0
        while True:
            self._reap()
            _, applied = self.server.ledger.snapshot()
            left = len(wanted - set(applied) - self._logged()[0])
            if left == 0 and time.monotonic() >= next_scan:
                next_scan = time.monotonic() + CONFIRM_EVERY
                states = self._states()
                left = len({k for k in wanted if states.get(k) not in ("COMPLETED", "UNKNOWN")})
                if left == 0:
                    break
            if time.monotonic() > deadline:
                break
            self.say(f"waiting for the effects: {left:,} events to go")
            time.sleep(3)

    def _states(self) -> dict[str, str]:
        """Every effect record's state, read straight from the table."""
        dynamodb = self.direct["dynamodb"]
        states: dict[str, str] = {}
        try:
            pages = dynamodb.get_paginator("scan").paginate(
                TableName=self.effects_table, ConsistentRead=True
            )
            for page in pages:
                for item in page["Items"]:
                    states[item["effectKey"]["S"]] = item["effectState"]["S"]
        except dynamodb.exceptions.ResourceNotFoundException:
            pass  # no worker has made the table yet
        return states

    def _collect(self) -> None:
        """With the workers stopped: the server's counts, the table, the logs."""
        o = self.outcome
        assert isinstance(o, EffectsOutcome)
        wanted = self._wanted()
        states = self._states()
        deliveries, applied = self.server.ledger.snapshot()
        reported, skipped = self._logged()
        o.calls = sum(deliveries.values())
        o.unkeyed_calls = self.server.ledger.unkeyed
        o.applied = len(set(applied) & wanted)
        o.unexpected = len(set(applied) - wanted)
        o.duplicates = sum(1 for n in applied.values() if n > 1)
        o.table = dict(Counter(states.values()))
        unknown = {k for k, s in states.items() if s == "UNKNOWN"}
        o.unknown = len(unknown & wanted)
        o.unknown_applied = sum(1 for k in unknown if applied[k])
        o.reported = len(reported)
        o.unreported = len(unknown - reported)
        o.completed_unapplied = sum(
            1 for k, s in states.items() if s == "COMPLETED" and not applied[k]
        )
        o.unsettled = sum(
            1
            for k in wanted
            if not (states.get(k) == "COMPLETED" and applied[k]) and states.get(k) != "UNKNOWN"
        )
        o.skipped = len(skipped)
        self.say(
            f"effects: {o.calls:,} calls, {o.applied:,} applied, {o.duplicates} twice, "
            f"unknown {o.unknown} (reported {o.reported}), unsettled {o.unsettled}"
        )
        if o.unsettled:
            lost = sorted(k for k in wanted if states.get(k) not in ("COMPLETED", "UNKNOWN"))
            o.diagnosis = [f"unsettled event ids (first 20): {', '.join(lost[:20])}"]

    def _logged(self) -> tuple[set[str], set[tuple[str, str]]]:
        """Keys the workers logged as unknown; positions they skipped without a key."""
        unknown: set[str] = set()
        skipped: set[tuple[str, str]] = set()
        for worker in [*self.workers.values(), *self.retired, *self.misconfigured]:
            for raw in worker.log_path.read_text(errors="replace").splitlines():
                if UNKNOWN_LOGGED not in raw and NO_KEY_LOGGED not in raw:
                    continue
                try:
                    line: dict[str, Any] = json.loads(raw)
                except ValueError:
                    continue
                event = str(line.get("event", ""))
                if event.startswith(UNKNOWN_LOGGED):
                    unknown.add(str(line.get("key")))
                elif event.startswith(NO_KEY_LOGGED):  # consumer.effects' own line
                    skipped.add((str(line.get("shard_id")), str(line.get("position"))))
        return unknown, skipped

    def _finish(self, spark: SparkSession | None) -> None:
        """No archive to compact."""


def run_effects(profile: Profile, seed: int, workdir: Path, behaviour: Behaviour) -> EffectsOutcome:
    """Run one chaos profile with the effects processor; its ``report()`` is printable."""
    outcome = EffectsChaos(profile, seed, workdir, behaviour).run()
    assert isinstance(outcome, EffectsOutcome)
    return outcome
