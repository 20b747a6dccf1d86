"""Side effects run once per key, fenced by the shard's lease: the API a processor uses.

A processor's batch is delivered again after a crash, a failover or a lease lost
mid-batch, so an effect it runs per record (a charge, an e-mail, an API call) would run
again. :class:`ShardEffects` runs it under a key, at most once per key while the key's
record lives (``ttl_seconds``), and returns the stored result on every repeat::

    class Charges:
        @classmethod
        def for_worker(cls, context):
            effects = Effects.for_worker(context)
            return lambda: cls(effects.shard())

        def __init__(self, once: ShardEffects) -> None:
            self.once = once

        async def process_records(self, batch):
            for record in batch.records:
                outcome = await self.once.record(batch.checkpointer, record, self.charge)
                if outcome.unknown: ...  # a person reconciles it (Mode.AT_MOST_ONCE)
            await batch.checkpointer.checkpoint()

        async def charge(self, key: str) -> dict[str, str]:
            return await payments.charge(..., idempotency_key=key)

The guarantee, exactly: between the claim and its completion the effect's outcome is
unknown after a crash. With :attr:`Mode.KEYED` (the default) the effect is run again
under the same key, which the downstream must honour (``Idempotency-Key``): exactly
once. With :attr:`Mode.AT_MOST_ONCE` it is never run again: the key is recorded as
UNKNOWN, counted and logged, and every later delivery returns an unknown outcome:
at most once, with every unknown outcome reported. An effect that raises
:class:`EffectNotDone` certainly did not happen: its claim is released, and a later
delivery runs it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

import orjson
import structlog

from consumer.effects.dynamo import DynamoEffectStore
from consumer.effects.model import Action, Effect, Mode, State, Tenure, decide, payload_hash
from consumer.effects.store import EffectRaceError, EffectStore, EffectStoreError
from consumer.errors import LanderError, RefusedError
from consumer.landing.envelope import EventIdPointer
from consumer.leases.model import Lease, wall_ms
from consumer.lifecycle.processor import Checkpointer
from consumer.stream.records import Record

if TYPE_CHECKING:
    from consumer.lifecycle.processor import WorkerContext
    from consumer.metrics import LanderMetrics

log = structlog.get_logger("consumer.effects")

T = TypeVar("T")
DEFAULT_TTL = 7 * 24 * 3600
"""How long a record lives: a week, longer than a stream's default retention (24 h), so
any delivery of a record the stream still holds meets its effect's record."""
MAX_RESULT_BYTES = 32 * 1024
"""A result larger than this as JSON is not kept (a repeat returns None, logged)."""
CACHE_KEYS = 10_000
"""Outcomes a shard keeps in memory for repeats within its run."""
RACES = 5
"""Times a write may find the record changed before the call gives up."""

Status = Literal["done", "repeat", "unknown", "reused", "no_key"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one effect."""

    key: str
    status: Status
    """``done``: it ran now; ``repeat``: it had run, this is its stored result;
    ``unknown``: whether it ran is unknown (AT_MOST_ONCE), it was not run again;
    ``reused``: the key was recorded for another payload, the effect was not run;
    ``no_key``: the record carries no event id (or is not JSON), the effect was not
    run (logged and counted: a producer bug, never a reason to stall the shard)."""
    result: Any = None

    @property
    def unknown(self) -> bool:
        """Whether a person has to find out if the effect happened."""
        return self.status == "unknown"


class EffectNotDone(Exception):  # noqa: N818 (what the user's effect says, not a failure)
    """Raised by an effect that certainly did not happen (refused before anything was
    done): its claim is released, and the next delivery runs it."""


class NoKeyError(LanderError):
    """A record has no event id to key its effect by."""


class Fenced(Protocol):
    """What fences an effect's writes: the worker's checkpointer (its lease), which a
    processor gets with each batch (``batch.checkpointer``)."""

    async def fenced(self, write: Callable[[Lease], Awaitable[T]]) -> T:
        """Run ``write`` with the lease as this worker holds it, while no other write
        of the lease can interleave; LeaseLostError when it is not held."""
        ...


class Effects:
    """The effects of one worker's processors, on one store."""

    def __init__(
        self,
        store: EffectStore,
        *,
        ttl_seconds: int = DEFAULT_TTL,
        event_id_pointer: str | None = None,
        metrics: LanderMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.ttl_seconds = ttl_seconds
        self.pointer = None if event_id_pointer is None else EventIdPointer(event_id_pointer)
        self.metrics = metrics
        self.clock = clock

    @classmethod
    def for_worker(cls, context: WorkerContext) -> Effects:
        """The worker's effects table (``LANDER_EFFECTS_TABLE``), keyed by records'
        event ids (``LANDER_EVENT_ID_POINTER``)."""
        settings = context.settings
        store = DynamoEffectStore(
            context.clients.dynamodb, settings.effects_table_name, settings.lease_table
        )
        return cls(
            store,
            ttl_seconds=settings.effects_ttl_seconds,
            event_id_pointer=settings.event_id_pointer,
            metrics=context.metrics,
        )

    async def probe(self) -> None:
        """The worker's start-up check of the effects table (a processor's
        ``probe_for_worker`` returns it): RefusedError in one line when it cannot be
        made or read."""
        try:
            await self.store.check()
        except EffectStoreError as exc:
            table = getattr(self.store, "table", "the effects table")
            raise RefusedError(f"effects table {table} is not usable: {exc}") from None

    def shard(self) -> ShardEffects:
        """The effects of one processor instance (one shard's run)."""
        return ShardEffects(self)

    def count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.effects.labels(outcome).inc()


@dataclass
class _KeyLock:
    """One key's calls in this run, one at a time; forgotten when none waits."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class ShardEffects:
    """One processor instance's effects: its claims, and what it already knows."""

    def __init__(self, effects: Effects) -> None:
        self.effects = effects
        self.claim = secrets.token_hex(8)
        self._known: OrderedDict[str, Outcome] = OrderedDict()
        self._locks: dict[str, _KeyLock] = {}
        self._started: set[str] = set()
        """Keys whose effect this run called (a claim of its own found in progress for
        any other key is a write whose answer was lost: still unstarted)."""

    def key_of(self, record: Record) -> str:
        """The record's event id (LANDER_EVENT_ID_POINTER); NoKeyError without one."""
        pointer = self.effects.pointer
        if pointer is None:
            raise NoKeyError("effects keyed by record need LANDER_EVENT_ID_POINTER (or key=)")
        try:
            key = pointer.resolve(orjson.loads(record.data))
        except orjson.JSONDecodeError:
            key = None
        if key is None:
            raise NoKeyError(
                f"record {record.shard_id} {record.position} has no event id at "
                f"{pointer.pointer}: pass key="
            )
        return key

    async def record(
        self,
        fence: Checkpointer | Fenced,
        record: Record,
        effect: Callable[[str], Awaitable[Any]],
        *,
        mode: Mode = Mode.KEYED,
        key: str | None = None,
    ) -> Outcome:
        """:meth:`run` keyed by the record's event id (or ``key``), for its payload. A
        record without an event id is not run: a ``no_key`` outcome, logged and counted
        (NoKeyError only when no LANDER_EVENT_ID_POINTER is set at all)."""
        if key is None and self.effects.pointer is not None:
            key = self._event_id(record)
            if key is None:
                self.effects.count("no_key")
                log.error(
                    "record without an event id: effect not run",
                    shard_id=record.shard_id,
                    position=str(record.position),
                    pointer=self.effects.pointer.pointer,
                )
                return Outcome("", "no_key")
        return await self.run(fence, key or self.key_of(record), record.data, effect, mode=mode)

    def _event_id(self, record: Record) -> str | None:
        try:
            return self.key_of(record)
        except NoKeyError:
            return None

    async def run(
        self,
        fence: Checkpointer | Fenced,
        key: str,
        payload: bytes,
        effect: Callable[[str], Awaitable[Any]],
        *,
        mode: Mode = Mode.KEYED,
        covers: str | None = None,
    ) -> Outcome:
        """Run ``effect(key)`` unless the key's effect already ran (its stored result
        is returned) or its outcome is unknown; see the module for the guarantee.
        ``fence`` is the batch's checkpointer: its lease fences every write; ``covers``
        is kept with the claim (a group's last position, :mod:`.groups`)."""
        if not hasattr(fence, "fenced"):
            raise TypeError(
                f"{type(fence).__name__} cannot fence effects by the lease: pass the "
                "worker's checkpointer (batch.checkpointer)"
            )
        fenced = cast("Fenced", fence)
        entry = self._locks.setdefault(key, _KeyLock())
        entry.users += 1
        try:
            async with entry.lock:
                known = self._known.get(key)
                if known is not None:
                    self.effects.count("repeat" if known.status != "unknown" else "unknown")
                    return known if known.status != "done" else replace(known, status="repeat")
                digest = payload_hash(payload)
                outcome = await self._run(fenced, key, digest, effect, mode, covers=covers)
        finally:
            entry.users -= 1
            if not entry.users:
                del self._locks[key]
        if outcome.status != "reused":
            self._known[key] = outcome
            if len(self._known) > CACHE_KEYS:
                self._known.popitem(last=False)
        return outcome

    async def _run(
        self,
        fence: Fenced,
        key: str,
        digest: str,
        effect: Callable[[str], Awaitable[Any]],
        mode: Mode,
        *,
        covers: str | None = None,
    ) -> Outcome:
        store = self.effects.store
        for _ in range(RACES):
            existing = await store.read(key)
            now = int(self.effects.clock())
            unstarted = None if key in self._started else self.claim
            action = decide(existing, digest, mode, now, unstarted)
            try:
                if action is Action.RETURN:
                    assert existing is not None
                    assert existing.result is not None
                    # Its completion went through though the answer was lost: done here.
                    status: Status = "done" if existing.tenure.claim == self.claim else "repeat"
                    self.effects.count(status)
                    return Outcome(key, status, json.loads(existing.result))
                if action is Action.UNKNOWN:
                    return self._unknown(key, "recorded as unknown earlier")
                if action is Action.REUSED:
                    self.effects.count("reused")
                    log.error("effect key reused for another payload: not run", key=key)
                    return Outcome(key, "reused")
                if action is Action.MARK_UNKNOWN:
                    assert existing is not None
                    await self._write(fence, existing, State.UNKNOWN, over=existing)
                    return self._unknown(key, "its claimant was gone before it completed")
                if action is Action.RESUME:
                    assert existing is not None
                    return await self._complete(fence, existing, effect, mode)
                claim = replace(self._effect(key, digest, State.IN_PROGRESS, now), covers=covers)
                claimed = await self._write(fence, claim, State.IN_PROGRESS, over=existing)
                if action is Action.TAKE_OVER:
                    self.effects.count("taken_over")
                return await self._complete(fence, claimed, effect, mode)
            except EffectRaceError:
                continue
        raise EffectRaceError(f"effect {key}: its record kept changing ({RACES} reads)")

    async def _complete(
        self,
        fence: Fenced,
        claimed: Effect,
        effect: Callable[[str], Awaitable[Any]],
        mode: Mode,
    ) -> Outcome:
        key = claimed.key
        self._started.add(key)
        try:
            result = await effect(key)
        except EffectNotDone:
            await self.effects.store.release(claimed)
            self._started.discard(key)
            self.effects.count("not_done")
            raise
        except Exception as exc:
            if mode is Mode.KEYED:
                raise  # run again under the same key, by the next delivery
            await self._write(fence, claimed, State.UNKNOWN, over=claimed)
            self._started.discard(key)
            return self._unknown(key, f"the effect raised {type(exc).__name__}: {exc}"[:300])
        text = json.dumps(result, separators=(",", ":"))
        if len(text.encode()) > MAX_RESULT_BYTES:
            log.warning("effect result too large to keep: repeats return null", key=key)
            text = "null"
        await self._write(fence, replace(claimed, result=text), State.COMPLETED, over=claimed)
        self._started.discard(key)  # completed: no claim of this run's left to resume
        self.effects.count("done")
        return Outcome(key, "done", result)

    def _effect(self, key: str, digest: str, state: State, now: int) -> Effect:
        return Effect(
            key=key,
            state=state,
            tenure=Tenure("", "", self.claim),
            payload_hash=digest,
            expires=now + self.effects.ttl_seconds,
        )

    async def _write(
        self, fence: Fenced, base: Effect, state: State, *, over: Effect | None
    ) -> Effect:
        """``base`` in ``state``, claimed by this run under the lease as held, written
        over ``over``; the record as written."""

        async def write(lease: Lease) -> Effect:
            tenure = Tenure(lease.key, lease.owner or "", self.claim)
            effect = replace(base, state=state, tenure=tenure, written_ms=wall_ms())
            await self.effects.store.write(effect, lease, over=over)
            return effect

        return await fence.fenced(write)

    def _unknown(self, key: str, why: str) -> Outcome:
        self.effects.count("unknown")
        log.error("effect outcome unknown: not run again; reconcile it by hand", key=key, why=why)
        return Outcome(key, "unknown")
