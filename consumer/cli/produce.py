"""``lander produce``: a load generator that knows exactly what it wrote.

It puts JSON events at a steady rate with PutRecords (500 entries a call at most),
and can make the two kinds of duplicate a real producer makes, so the lander and the
compaction have something to remove:

- **producer retries**: a share of events is sent a second time, a few batches later,
  with the same ``event_id`` (a producer that timed out and retried a put that had in
  fact succeeded). Kinesis gives the copy a new sequence number.
- **KPL aggregation**: a share of events travels packed inside KPL aggregates (the
  format the Kinesis Producer Library writes), each user record with its own partition
  key and subsequence number.
- **bad payloads** (optional): records that are not JSON, or not UTF-8, which a JSON
  lander must dead-letter without stalling the shard.

Entries a PutRecords call reports as failed (throttled) are put again until they
succeed; they were never written, so that is not a duplicate. With ``ledger`` on, the
result lists every user record's position, which the demo uses to check the archive.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

import structlog

from consumer.aio import wait_event
from consumer.archive.envelope import format_ts
from consumer.aws import backoff, call_failure, cause, endpoint, error_code
from consumer.errors import MissingError
from consumer.stream.kpl import KPL_DEFAULT_MAX_BYTES
from consumer.stream.kpl_encode import aggregate_chunks

if TYPE_CHECKING:
    from types_aiobotocore_kinesis import KinesisClient

log = structlog.get_logger("consumer.cli.produce")

GIVE_UP_SECONDS = 30.0
"""A PutRecords call that keeps failing (no answer, 5xx) is given up after this long."""
READY_SECONDS = 30.0
"""How long :func:`check_stream` waits for a stream that is still being created."""
MAX_ENTRIES_PER_CALL = 500
MAX_BYTES_PER_CALL = 5 * 1024 * 1024
RETRY_DELAY_BATCHES = 3
"""A producer retry goes out this many batches after the original."""
_TICK = 0.1


@dataclass(frozen=True, slots=True)
class ProduceSpec:
    """What to produce. ``rate`` is user records a second (0: as fast as possible)."""

    stream: str
    count: int
    rate: float = 1000.0
    payload_size: int = 200
    retry_share: float = 0.0
    aggregate_share: float = 0.0
    bad_records: int = 0
    keys: int = 64
    run_id: str = "run"
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if self.count < 0:
            problems.append("count must be >= 0")
        if self.rate < 0:
            problems.append("rate must be >= 0")
        if not 0 <= self.retry_share <= 1:
            problems.append("retry share must be between 0 and 1")
        if not 0 <= self.aggregate_share <= 1:
            problems.append("aggregate share must be between 0 and 1")
        if not 0 <= self.payload_size <= 900_000:
            problems.append("payload size must be between 0 and 900000 bytes")
        if self.keys < 1:
            problems.append("keys must be >= 1")
        if self.bad_records < 0:
            problems.append("bad records must be >= 0")
        if problems:
            raise ValueError("; ".join(problems))


@dataclass(slots=True)
class UserPut:
    """One user record to put: an event (or its retry), or a bad payload."""

    event_id: str | None
    partition_key: str
    data: bytes
    retry: bool = False
    aggregated: bool = False


Place = tuple[str, str, int]
"""A user record's position as the archive spells it: shard, sequence, subsequence."""


@dataclass(frozen=True, slots=True)
class Landmark:
    """Where Kinesis put one user record (what the demo looks for in the archive)."""

    shard_id: str
    sequence: str
    subsequence: int
    event_id: str | None
    bad: bool

    @property
    def place(self) -> Place:
        """This record's position."""
        return (self.shard_id, self.sequence, self.subsequence)


@dataclass(slots=True)
class Produced:
    """What was written, counted by kind."""

    events: int = 0
    retries: int = 0
    bad: int = 0
    kinesis_records: int = 0
    aggregates: int = 0
    aggregated_user_records: int = 0
    put_calls: int = 0
    failed_entries_put_again: int = 0
    seconds: float = 0.0
    landmarks: list[Landmark] = field(default_factory=list)

    @property
    def user_records(self) -> int:
        """Every user record written: events, retries and bad payloads."""
        return self.events + self.retries + self.bad

    def places(self, *, bad: bool = False) -> set[Place]:
        """Positions of the good records (or, with ``bad``, of the bad payloads)."""
        return {mark.place for mark in self.landmarks if mark.bad == bad}

    def event_ids(self) -> set[str]:
        """The distinct event ids written (retries share their original's)."""
        return {m.event_id for m in self.landmarks if m.event_id is not None and not m.bad}


class Plan:
    """The deterministic sequence of user records for a spec (pure; no I/O)."""

    def __init__(self, spec: ProduceSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.next_event = 0
        self.bad_left = spec.bad_records
        self.pending_retries: list[tuple[int, UserPut]] = []
        self.batch = 0
        self.per_key_seq: dict[str, int] = {}
        self._pad = "x" * max(0, spec.payload_size - 120)
        self._bad_every = max(1, spec.count // (spec.bad_records + 1)) if spec.bad_records else 0

    @property
    def done(self) -> bool:
        """True once every event, retry and bad payload was handed out."""
        return self.next_event >= self.spec.count and not self.pending_retries and not self.bad_left

    def take(self, n: int) -> list[UserPut]:
        """The next ``n`` events, plus the retries and bad payloads due with them."""
        self.batch += 1
        out: list[UserPut] = []
        due = [put for at, put in self.pending_retries if at <= self.batch]
        self.pending_retries = [(at, p) for at, p in self.pending_retries if at > self.batch]
        out.extend(due)
        for _ in range(n):
            if self.next_event >= self.spec.count:
                break
            put = self._event(self.next_event)
            self.next_event += 1
            out.append(put)
            if self.rng.random() < self.spec.retry_share:
                copy = UserPut(put.event_id, put.partition_key, put.data, retry=True)
                self.pending_retries.append((self.batch + RETRY_DELAY_BATCHES, copy))
            if self._bad_every and self.bad_left and self.next_event % self._bad_every == 0:
                out.append(self._bad())
        if self.next_event >= self.spec.count:
            while self.bad_left:
                out.append(self._bad())
            if not n:
                # Nothing new to send: release the retries still waiting.
                out.extend(put for _, put in self.pending_retries)
                self.pending_retries = []
        for put in out:
            if put.event_id is not None and self.rng.random() < self.spec.aggregate_share:
                put.aggregated = True
        return out

    def _event(self, index: int) -> UserPut:
        key = f"key-{self.rng.randrange(self.spec.keys):04d}"
        seq = self.per_key_seq.get(key, 0) + 1
        self.per_key_seq[key] = seq
        event_id = f"{self.spec.run_id}-{index:09d}"
        body = {
            "event_id": event_id,
            "key": key,
            "seq": seq,
            "event_time": format_ts(datetime.now(UTC)),
            "amount": self.rng.randrange(1, 100_000) / 100,
            "pad": self._pad,
        }
        return UserPut(event_id, key, json.dumps(body, separators=(",", ":")).encode())

    def _bad(self) -> UserPut:
        self.bad_left -= 1
        kinds = (b'{"event_id": "truncated', b"\xff\xfe not utf-8 \xc3\x28", b"not json at all")
        data = kinds[self.bad_left % len(kinds)]
        return UserPut(None, f"bad-{self.bad_left}", data)


def entries_for(puts: list[UserPut]) -> list[tuple[dict[str, Any], list[UserPut]]]:
    """PutRecords entries, each with the user records it carries (in subsequence order)."""
    plain = [put for put in puts if not put.aggregated]
    packed = [put for put in puts if put.aggregated]
    entries: list[tuple[dict[str, Any], list[UserPut]]] = [
        ({"Data": put.data, "PartitionKey": put.partition_key}, [put]) for put in plain
    ]
    if packed:
        start = 0
        for chunk in aggregate_chunks(
            [(put.partition_key, put.data) for put in packed], KPL_DEFAULT_MAX_BYTES
        ):
            members = packed[start : start + chunk.record_count]
            start += chunk.record_count
            entries.append(({"Data": chunk.data, "PartitionKey": chunk.partition_key}, members))
    return entries


def _calls(
    entries: list[tuple[dict[str, Any], list[UserPut]]],
) -> list[list[tuple[dict[str, Any], list[UserPut]]]]:
    calls: list[list[tuple[dict[str, Any], list[UserPut]]]] = [[]]
    size = 0
    for entry in entries:
        bytes_ = len(entry[0]["Data"]) + len(entry[0]["PartitionKey"])
        if calls[-1] and (
            len(calls[-1]) >= MAX_ENTRIES_PER_CALL or size + bytes_ > MAX_BYTES_PER_CALL
        ):
            calls.append([])
            size = 0
        calls[-1].append(entry)
        size += bytes_
    return [call for call in calls if call]


async def check_stream(kinesis: KinesisClient, name: str) -> None:
    """The stream exists and takes puts, before the first one: MissingError (exit 3)
    when it does not exist, UnreachableError (exit 1) when Kinesis does not answer,
    LanderError (exit 1) otherwise; waits up to READY_SECONDS while it is CREATING."""
    where = f"Kinesis at {endpoint(kinesis)}"
    deadline = time.monotonic() + READY_SECONDS
    while True:
        try:
            response = await kinesis.describe_stream_summary(StreamName=name)
        except Exception as exc:
            if error_code(exc) == "ResourceNotFoundException":
                raise MissingError(
                    f"Kinesis stream {name} does not exist ({where}); create it (lander "
                    f"local-stack --stream {name}, on the local stack) or check "
                    "LANDER_STREAM, AWS_REGION and the endpoint"
                ) from None
            raise call_failure(exc, where, f"cannot describe stream {name}") from None
        status = response["StreamDescriptionSummary"]["StreamStatus"]
        if status in ("ACTIVE", "UPDATING"):
            return
        if status != "CREATING" or time.monotonic() > deadline:
            raise MissingError(f"Kinesis stream {name} is {status}, not ACTIVE ({where})")
        await asyncio.sleep(0.5)


class Producer:
    """Runs a :class:`Plan` against a stream at the spec's rate."""

    def __init__(
        self,
        kinesis: KinesisClient,
        spec: ProduceSpec,
        *,
        ledger: bool = False,
        progress: Callable[[Produced, ProduceSpec], None] | None = None,
    ) -> None:
        self.kinesis = kinesis
        self.spec = spec
        self.plan = Plan(spec)
        self.ledger = ledger
        self.progress = progress
        self.result = Produced()
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """Stop after the call in flight (the result counts what was written)."""
        self._stop.set()

    async def run(self) -> Produced:
        """Produce until the plan is done or :meth:`stop` is called."""
        started = time.monotonic()
        owed = 0.0
        next_tick = started
        last_progress = 0.0
        while not self.plan.done and not self._stop.is_set():
            if self.spec.rate:
                owed += self.spec.rate * _TICK
                n = int(owed)
                owed -= n
            else:
                n = MAX_ENTRIES_PER_CALL
            puts = self.plan.take(n)
            for call in _calls(entries_for(puts)):
                await self._put(call)
            self.result.seconds = time.monotonic() - started
            if self.progress is not None and (time.monotonic() - last_progress >= 0.25):
                self.progress(self.result, self.spec)
                last_progress = time.monotonic()
            if self.spec.rate:
                next_tick += _TICK
                delay = next_tick - time.monotonic()
                if delay > 0:
                    await wait_event(self._stop, delay)
                else:
                    next_tick = time.monotonic()  # behind: do not try to catch up in a burst
        self.result.seconds = time.monotonic() - started
        if self.progress is not None:
            self.progress(self.result, self.spec)
        return self.result

    async def _put(self, call: list[tuple[dict[str, Any], list[UserPut]]]) -> None:
        attempt = 0
        failing_since = 0.0
        while call:
            try:
                records: list[Any] = [entry for entry, _ in call]
                response = await self.kinesis.put_records(
                    StreamName=self.spec.stream, Records=records
                )
            except Exception as exc:
                failing_since = failing_since or time.monotonic()
                self._give_up_on(exc, failing_since)
                attempt += 1
                log.warning("PutRecords failed; retrying", error=cause(exc))
                await asyncio.sleep(backoff(attempt, base=0.1, cap=5.0))
                continue
            failing_since = 0.0
            self.result.put_calls += 1
            failed = []
            for (entry, members), outcome in zip(call, response["Records"], strict=True):
                if "SequenceNumber" not in outcome:
                    failed.append((entry, members))
                    continue
                self._count(members, outcome["ShardId"], outcome["SequenceNumber"])
            if failed:
                attempt += 1
                self.result.failed_entries_put_again += len(failed)
                await asyncio.sleep(backoff(attempt, base=0.05, cap=2.0))
            call = failed

    def _give_up_on(self, exc: Exception, failing_since: float) -> None:
        """Raise the error that ends the run for a failed call: at once for a stream
        that is gone, after GIVE_UP_SECONDS of failures for anything else."""
        where = f"Kinesis at {endpoint(self.kinesis)}"
        if error_code(exc) == "ResourceNotFoundException":
            raise MissingError(f"Kinesis stream {self.spec.stream} is gone ({where})") from None
        if time.monotonic() - failing_since < GIVE_UP_SECONDS:
            return
        raise call_failure(exc, where, f"PutRecords failed for {GIVE_UP_SECONDS:.0f} s") from None

    def _count(self, members: list[UserPut], shard_id: str, sequence: str) -> None:
        result = self.result
        result.kinesis_records += 1
        if len(members) > 1 or members[0].aggregated:
            result.aggregates += 1
            result.aggregated_user_records += len(members)
        for subsequence, put in enumerate(members):
            if put.event_id is None:
                result.bad += 1
            elif put.retry:
                result.retries += 1
            else:
                result.events += 1
            if self.ledger:
                sub = subsequence if put.aggregated else 0
                result.landmarks.append(
                    Landmark(shard_id, sequence, sub, put.event_id, put.event_id is None)
                )


class ProgressLine:
    """A one-line progress bar on a terminal; a log line every few seconds otherwise."""

    def __init__(self, stream: TextIO = sys.stderr, every: float = 5.0) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.every = every
        self._last = 0.0

    def __call__(self, done: Produced, spec: ProduceSpec) -> None:
        """Show how far the producer is."""
        events = done.events
        share = events / spec.count if spec.count else 1.0
        rate = done.user_records / done.seconds if done.seconds else 0.0
        text = (
            f"{events}/{spec.count} events ({share:.0%}), {done.retries} retries, "
            f"{done.aggregated_user_records} in {done.aggregates} aggregates, {done.bad} bad; "
            f"{rate:,.0f} records/s"
        )
        if self.tty:
            width = 24
            filled = round(width * share)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\x1b[K")
            if events >= spec.count:
                self.stream.write("\n")
            self.stream.flush()
        elif time.monotonic() - self._last >= self.every or events >= spec.count:
            self._last = time.monotonic()
            self.stream.write(f"produce: {text}\n")
            self.stream.flush()
