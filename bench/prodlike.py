"""A landed archive that looks like production: one day of one stream (``orders`` by default).

Written by this module's own code (byte formatting, ``json`` for odd strings, ``gzip``
and ``zlib``), following docs/landing.md, and never by the lander's writer, so what a
reader or a compaction makes of it is checked against an archive built independently.
:mod:`bench.prodlike_truth` says what a correct compaction publishes from it.

Layout and lines
----------------
Six shards, one object per run: one shard's consecutive records of one minute (cut
again every 10,000 records), under
``stream=orders/dt=YYYY-MM-DD/hour=HH/minute=mm/shard=shardId-00000000000N/{first}-{last}.jsonl.gz``
with the run's first and last sequence numbers (no KPL aggregates, so subsequence 0).
One line per record, fields in the envelope's order: ``stream``, ``shard_id``,
``sequence_number`` (56 digits, increasing with arrival in a shard),
``subsequence_number``, ``partition_key``, ``arrival_ts``
(``YYYY-MM-DDTHH:MM:SS.mmmZ``), ``event_id`` and ``data`` last: the payload's JSON text
verbatim.

Traffic
-------
A diurnal curve (quiet at 04:00 UTC, busiest at 16:00) and uneven shards. A shard-minute
expecting fewer than four records gets a burst of 1-7 records or nothing, so the small
archive is about 550 objects, and the 200k and 2M ones about 8,800 (every shard-minute
busy, plus copies).

Payloads (:data:`SHAPES`): mostly compact objects; objects with spaces; arrays; text
outside ASCII (raw, emoji, ``\\u00e9`` escapes, U+2028 and U+0085 inside strings);
integers beyond 64 bits; exact decimals (``0.1000000000000000055511151231257827``,
``1E+2``, ``-0.0``, ``1e-7``); bare strings (``"just a string"``, ``"42"``, ``"true"``,
``""``, one holding ``,\\"data\\":``); bare numbers; ``true``/``false``; ``null``;
``{}``. Every variant of every shape occurs in every size. The line's ``event_id`` is
the producer's id (a UUID; 0.5 % null; a few odd ones: empty, non-ASCII, holding
``","data":"`` and a backslash); object payloads carry the same id (null included),
other payloads carry none but the line still does.

Duplicates and damage
---------------------
- Producer retries: 2 % of events are re-sent at a new sequence number (three in four
  on the same shard) with the same id and payload bytes, after seconds (45 %), minutes
  (35 %) or 1-6 hours (15 %), or at the same millisecond on another shard (5 %, a race);
  15 % of them are re-sent once more. Re-sends that would fall after the day are not
  sent. The first few retries' classes are fixed (:data:`FORCED_RETRIES`) and every odd
  event id is re-sent minutes later, so even the small archive has each case.
- Transport copies: 2 % of runs of two or more lines get a second object with a prefix
  or a suffix of the same lines, in the same minute folder (another first or last).
- Late objects (phase 2): a few runs are only written by ``write_phase(2)``, among
  them one holding the original of a retry that arrives hours later and one holding
  such a retry, so phase 2 changes what a later hour keeps.
- Damaged objects (phase 1): truncated ones (cut mid-line, at least one complete line
  before the cut and one lost) and corrupt ones, in turn: plain JSON Lines that were
  never gzipped, bytes flipped until zlib fails, junk after the gzip stream. With
  ``damaged=False`` they are not written at all.

Sizes: ``small`` (~2k lines), ``200k`` and ``2M``; the same size and seed write the same
bytes. Memory is a few dozen bytes per record of planning; objects stream to disk. Each
phase is written once: objects are created exclusively, never overwritten.

Long module: the plan (arrivals, retries, sequence numbers, runs, damage) and the bytes
written from it must stay one deterministic unit, and the lookups the tests use
(:meth:`ProdArchive.payload_at`, :meth:`ProdArchive.object_lines`) invert that plan.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import itertools
import json
import math
import random
import time
import zlib
from array import array
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Literal

from bench.prodlike_truth import read_body

STREAM = "orders"
DAY = date(2026, 11, 21)
SHARDS = 6
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
MAX_RECORDS_PER_FILE = 10_000
SHARD_WEIGHTS = (1.5, 1.2, 1.0, 0.9, 0.8, 0.6)
"""Relative traffic per shard (mean 1)."""
BURST_MEAN = 4
"""A shard-minute expecting fewer records than this is a burst of 1..7 or nothing."""
RETRY_SHARE = 0.02
CHAIN_SHARE = 0.15
TRANSPORT_SHARE = 0.02
NULL_ID_PER_MILLE = 5
RETRY_CLASSES = {
    "seconds": (0.45, 100, MINUTE_MS - 1),
    "minutes": (0.35, MINUTE_MS, HOUR_MS - 1),
    "hours": (0.15, HOUR_MS, 6 * HOUR_MS),
    "race": (0.05, 0, 0),
}
"""Retry delay classes: share, shortest and longest delay in ms (race: another shard)."""
FORCED_RETRIES = ("hours", "hours", "race", "minutes", "seconds", "hours", "minutes")
"""The first retries' classes, so the small archive has each (the first is re-sent twice)."""
SEQUENCE_STEP = 10**30
CORRUPTIONS = ("not_gzip", "flipped", "junk_after")

Size = Literal["small", "200k", "2M"]


@dataclass(frozen=True, slots=True)
class SizeSpec:
    """How much of everything one size writes."""

    lines: int
    late: int
    truncated: int
    corrupt: int


SIZES: dict[str, SizeSpec] = {
    "small": SizeSpec(2_000, late=4, truncated=2, corrupt=3),
    "200k": SizeSpec(200_000, late=6, truncated=4, corrupt=3),
    "2M": SizeSpec(2_000_000, late=8, truncated=6, corrupt=4),
}

_OBJECT = (
    b'{"event_id":%s,"order_id":%d,"customer":"c-%05d","status":"%s","amount":"%d.%02d",'
    b'"currency":"EUR","items":[%s],"ts":"%s"}'
)
_ITEM = b'{"sku":"SKU-%05d","qty":%d}'
_STATUS = (b"new", b"paid", b"shipped", b"cancelled")
SHAPES: dict[str, tuple[float, tuple[bytes, ...]]] = {
    "object": (0.78, (_OBJECT,)),
    "spaced": (0.05, (b'{"event_id": %s, "a": 1, "b": [1, 2], "note": "spaced out"}',)),
    "array": (
        0.02,
        (b'[{"event_id":%s,"n":1},2,"three",null,true]', b"[]", b"[1, 2, 3]", b'[[[]],{"a":[{}]}]'),
    ),
    "unicode": (
        0.03,
        (
            '{"event_id":%s,"name":"Zoë Ångström","city":"東京","mood":"🚀🎉"}'.encode(),
            b'{"event_id":%s,"escaped":"caf\\u00e9 \\ud83d\\ude80 \\" \\\\ \\n"}',
            '{"event_id":%s,"separators":"a\u2028b\u0085c"}'.encode(),
        ),
    ),
    "bigint": (0.02, (b'{"event_id":%s,"big":%d,"negative":-%d,"exact":18446744073709551616}',)),
    "decimal": (
        0.02,
        (
            b'{"event_id":%s,"price":0.1000000000000000055511151231257827,"hundred":1E+2,'
            b'"negative_zero":-0.0,"tiny":1e-7}',
            b'{"event_id":%s,"amount":12.50,"avogadro":6.02214076E23,"small":-1.5e-300}',
        ),
    ),
    "string": (
        0.02,
        (
            b'"just a string"',
            b'"42"',
            b'"true"',
            b'""',
            b'"null"',
            b'"with \\"quotes\\" and ,\\"data\\": inside"',
            '"\\u00e9t\\u00e9 été 🌞"'.encode(),
        ),
    ),
    "number": (
        0.02,
        (b"42", b"-7", b"3.14", b"1E+2", b"-0.0", b"1e-7", b"0", b"123456789012345678901234567890"),
    ),
    "bool": (0.01, (b"true", b"false")),
    "null": (0.01, (b"null",)),
    "empty": (0.02, (b"{}",)),
}
"""Payload shapes: share of events and the variants (``%s``: the event id as JSON)."""
_KINDS = tuple(SHAPES)
_CUMULATIVE = list(itertools.accumulate(share for share, _ in SHAPES.values()))
_WITH_ID = {kind for kind, (_, variants) in SHAPES.items() if b"%s" in variants[0]}

ODD_IDS = ("", "zamówienie-ünïcødé-🚀", 'x","data":"y', "back\\slash", "42")
"""Event ids a producer may send besides UUIDs."""
ODD_KEYS = ("Zoë", "東京/渋谷", "a b", 'k","data":"v', "🚀")
"""Partition keys besides ``customer-NNNNN``."""

_MASK = (1 << 64) - 1
_MILLIS = [b"%03dZ" % milli for milli in range(1000)]


def _mix(value: int) -> int:
    """splitmix64: a well-spread 64-bit hash of an integer."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def shard_name(index: int) -> str:
    """The id Kinesis gives shard ``index``."""
    return f"shardId-{index:012d}"


def _sequence_base(shard: int) -> int:
    # 56 digits; a shard's numbers grow by far less than 10**47.
    return 49589 * 10**51 + (shard + 1) * 10**47


def _json(text: str | None) -> bytes:
    return json.dumps(text, ensure_ascii=False).encode()


def _curve(minute: int) -> float:
    """Traffic of a minute of the day relative to the day's mean."""
    phase = 2 * math.pi * (minute - 240) / 1440
    return (0.25 + 0.75 * (1 - math.cos(phase)) / 2) / 0.625


@dataclass
class PhaseReport:
    """What one ``write_phase`` wrote."""

    phase: int
    objects: int = 0
    lines: int = 0
    """Lines written into objects: every copy, damaged objects included."""
    gzip_bytes: int = 0
    seconds: float = 0.0
    shapes: Counter[str] = field(default_factory=Counter)
    """Lines written by payload shape."""
    transport_copies: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    truncated: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Relative key -> (lines written, complete lines before the cut)."""
    corrupt: dict[str, str] = field(default_factory=dict)
    """Relative key -> how it was damaged (:data:`CORRUPTIONS`)."""


class ProdArchive:
    """The plan of one archive; :meth:`write_phase` writes its objects under ``root``."""

    def __init__(
        self,
        root: Path,
        size: Size | str = "small",
        seed: int = 0,
        *,
        day: date = DAY,
        damaged: bool = True,
        stream: str = STREAM,
    ) -> None:
        if size not in SIZES:
            raise ValueError(f"size must be one of {', '.join(SIZES)}: {size!r}")
        self.root = root
        self.size = size
        self.seed = seed
        self.day = day
        self.damaged = damaged
        self.spec = SIZES[size]
        self.stream = stream
        self._rng = random.Random(f"prodlike/{seed}")
        self._salt = _mix(seed)
        self._day_prefix = f"{day.isoformat()}T".encode()
        self._seconds: dict[int, bytes] = {}
        self.retries: Counter[str] = Counter()
        """Re-sends planned, by delay class (``chained``: second re-sends of an event)."""
        self.dropped_retries = 0
        """Re-sends that would have fallen after the day."""
        self.hour_retries: list[tuple[int, int, int, int, int]] = []
        """Re-sends an hour or more after: (event, shard, arrival, retry shard, retry arrival)."""
        self._dirs: set[Path] = set()
        self._arrivals = array("q")
        self._shards = bytearray()
        self._plan_events()
        self._odd_ids = self._place_odd_ids()
        self._forced = self._place_forced_shapes()
        self._sends = self._plan_sends()
        self._runs = [self._cut_runs(sends) for sends in self._sends]
        self._run_starts = [[start for start, _ in runs] for runs in self._runs]
        self._plan_specials()

    # ------------------------------------------------------------ planning

    def _plan_events(self) -> None:
        """Fresh events: arrival (ms into the day) and shard, in time order."""
        rng = self._rng
        fresh = self.spec.lines / (1 + RETRY_SHARE * (1 + CHAIN_SHARE))
        per_shard_minute = fresh / (1440 * SHARDS)
        for minute in range(1440):
            curve = _curve(minute)
            for shard, weight in enumerate(SHARD_WEIGHTS):
                expected = per_shard_minute * curve * weight
                if expected >= BURST_MEAN:
                    count = max(0, round(rng.gauss(expected, math.sqrt(expected))))
                elif rng.random() < expected / BURST_MEAN:
                    count = rng.randint(1, 2 * BURST_MEAN - 1)
                else:
                    count = 0
                start = minute * MINUTE_MS
                self._arrivals.extend(
                    sorted(start + int(rng.random() * MINUTE_MS) for _ in range(count))
                )
                self._shards.extend(bytes([shard]) * count)

    @property
    def events(self) -> int:
        """Fresh events planned (each sent once, some re-sent)."""
        return len(self._arrivals)

    @property
    def sends(self) -> int:
        """Records sent: fresh events and re-sends (each written once, bar copies)."""
        return sum(len(sends) for sends in self._sends)

    def _place_odd_ids(self) -> dict[int, str]:
        chosen = self._rng.sample(range(self.events), len(ODD_IDS))
        return dict(zip(chosen, ODD_IDS, strict=True))

    def _place_forced_shapes(self) -> dict[int, tuple[str, int]]:
        """One event of every variant of every shape, at random events."""
        wanted = [
            (kind, variant)
            for kind, (_, variants) in SHAPES.items()
            for variant in range(len(variants))
        ]
        chosen = self._rng.sample(range(self.events), len(wanted))
        return dict(zip(chosen, wanted, strict=True))

    def _retry_class(self, rng: random.Random) -> str:
        draw = rng.random()
        for name, (share, _, _) in RETRY_CLASSES.items():
            draw -= share
            if draw < 0:
                return name
        return "seconds"

    def _plan_sends(self) -> list[array[int]]:
        """Every send (fresh and re-sent) of each shard, as ``arrival << 32 | event``, sorted."""
        rng = self._rng
        sends: list[list[int]] = [[] for _ in range(SHARDS)]
        for event, (arrival, shard) in enumerate(zip(self._arrivals, self._shards, strict=True)):
            sends[shard].append(arrival << 32 | event)
        retried = 0
        for event in range(self.events):
            if event in self._odd_ids:
                # Every odd id is re-sent, so its dedupe is exercised in every size.
                kind, chained = "minutes", False
            elif rng.random() < RETRY_SHARE:
                forced = FORCED_RETRIES[retried] if retried < len(FORCED_RETRIES) else None
                kind = forced or self._retry_class(rng)
                chained = retried == 0 or rng.random() < CHAIN_SHARE
                retried += 1
            else:
                continue
            arrival, shard = self._arrivals[event], self._shards[event]
            for attempt in range(2 if chained else 1):
                if attempt:
                    kind = self._retry_class(rng)
                    if kind == "race":
                        kind = "seconds"
                _, low, high = RETRY_CLASSES[kind]
                later = arrival + rng.randint(low, high)
                other = (shard + rng.randint(1, SHARDS - 1)) % SHARDS
                target = other if kind == "race" or rng.random() < 0.25 else shard
                if later >= DAY_MS:
                    self.dropped_retries += 1
                    break
                sends[target].append(later << 32 | event)
                self.retries["chained" if attempt else kind] += 1
                if kind == "hours":
                    self.hour_retries.append((event, shard, arrival, target, later))
                arrival, shard = later, target
        return [array("q", sorted(shard_sends)) for shard_sends in sends]

    @staticmethod
    def _cut_runs(sends: array[int]) -> list[tuple[int, int]]:
        """[start, stop) of each run: cut at a minute change and every 10,000 records."""
        runs: list[tuple[int, int]] = []
        start = 0
        for k in range(1, len(sends) + 1):
            if (
                k == len(sends)
                or (sends[k] >> 32) // MINUTE_MS != (sends[start] >> 32) // MINUTE_MS
                or k - start >= MAX_RECORDS_PER_FILE
            ):
                runs.append((start, k))
                start = k
        return runs

    def _run_of(self, shard: int, arrival: int, event: int) -> tuple[int, int]:
        sends = self._sends[shard]
        k = bisect.bisect_left(sends, arrival << 32 | event)
        return shard, bisect.bisect_right(self._run_starts[shard], k) - 1

    def _plan_specials(self) -> None:
        """Which runs are late, damaged or copied, and every object's key."""
        rng = self._rng
        spec = self.spec
        runs = [(s, r) for s in range(SHARDS) for r in range(len(self._runs[s]))]
        late: list[tuple[int, int]] = []
        # A run holding an original whose retry lands in a later hour, and one holding
        # a retry whose original is in an earlier hour.
        crossing = [h for h in self.hour_retries if h[2] // HOUR_MS < h[4] // HOUR_MS]
        if crossing:
            event, shard, arrival, _, _ = crossing[0]
            late.append(self._run_of(shard, arrival, event))
        if len(crossing) > 1:
            event, _, _, shard, arrival = crossing[-1]
            late.append(self._run_of(shard, arrival, event))
        others = [run for run in rng.sample(runs, len(runs)) if run not in late]
        late += others[: max(0, spec.late - len(late))]
        taken = set(late)

        def length(run: tuple[int, int]) -> int:
            start, stop = self._runs[run[0]][run[1]]
            return stop - start

        long_runs = [run for run in others if run not in taken and length(run) >= 4]
        truncated = long_runs[: spec.truncated]
        taken.update(truncated)
        corrupt = [run for run in others if run not in taken][: spec.corrupt]
        taken.update(corrupt)
        self._late = set(late)
        self._truncated = set(truncated)
        self._corrupt = {run: CORRUPTIONS[i % len(CORRUPTIONS)] for i, run in enumerate(corrupt)}
        copyable = [run for run in runs if run not in self._late and length(run) >= 2]
        count = min(len(copyable), max(3, round(TRANSPORT_SHARE * len(runs))))
        self._copies: dict[tuple[int, int], tuple[int, int]] = {}
        for run in sorted(rng.sample(copyable, count)):
            start, stop = self._runs[run[0]][run[1]]
            cut = rng.randint(start + 1, stop - 1)
            self._copies[run] = (start, cut) if rng.random() < 0.5 else (cut, stop)
        self.objects: dict[str, tuple[int, int, int]] = {}
        """Every planned object's relative key -> (shard, first, stop) of its lines."""
        for s, r in runs:
            start, stop = self._runs[s][r]
            self.objects[self.rel(s, start, stop)] = (s, start, stop)
            if (s, r) in self._copies:
                first, last = self._copies[(s, r)]
                self.objects[self.rel(s, first, last)] = (s, first, last)

    # ------------------------------------------------------------ lookups

    def sequence(self, shard: int, k: int) -> int:
        """The sequence number of a shard's ``k``-th send."""
        jitter = _mix(self._salt ^ (shard << 40 | k)) % (SEQUENCE_STEP // 2)
        return _sequence_base(shard) + (k + 1) * SEQUENCE_STEP + jitter

    def rel(self, shard: int, start: int, stop: int) -> str:
        """The relative key (below ``stream=orders/``) of an object of sends [start, stop)."""
        arrival = self._sends[shard][start] >> 32
        hour, minute = divmod(arrival // MINUTE_MS, 60)
        first, last = self.sequence(shard, start), self.sequence(shard, stop - 1)
        return (
            f"dt={self.day.isoformat()}/hour={hour:02d}/minute={minute:02d}/"
            f"shard={shard_name(shard)}/{first}-{last}.jsonl.gz"
        )

    def path(self, rel: str) -> Path:
        """Where an object lies on disk."""
        return self.root / f"stream={self.stream}" / rel

    @property
    def late(self) -> list[str]:
        """Relative keys of the objects only phase 2 writes."""
        return sorted(self._rel_of(run) for run in self._late)

    @property
    def truncated(self) -> list[str]:
        """Relative keys of the objects written cut short (when ``damaged``)."""
        return sorted(self._rel_of(run) for run in self._truncated)

    @property
    def corrupt(self) -> dict[str, str]:
        """Relative keys of the objects written corrupt (when ``damaged``) -> how."""
        return {self._rel_of(run): how for run, how in sorted(self._corrupt.items())}

    @property
    def transport_copies(self) -> list[str]:
        """Relative keys of the second objects holding part of a run."""
        return sorted(self.rel(s, *bounds) for (s, _), bounds in self._copies.items())

    def _rel_of(self, run: tuple[int, int]) -> str:
        start, stop = self._runs[run[0]][run[1]]
        return self.rel(run[0], start, stop)

    def payload_at(self, shard_id: str, sequence_number: str | int) -> bytes:
        """The payload bytes the record at this position carries."""
        shard = int(shard_id.removeprefix("shardId-"))
        k = (int(sequence_number) - _sequence_base(shard)) // SEQUENCE_STEP - 1
        send = self._sends[shard][k]
        return self._event(send & 0xFFFFFFFF)[2]

    def object_lines(self, rel: str) -> list[bytes]:
        """The lines (with ``\\n``) written into an object, before any damage."""
        shard, start, stop = self.objects[rel]
        return [self._line(shard, k)[0] for k in range(start, stop)]

    # ------------------------------------------------------------ bytes

    def _stamp(self, ms: int) -> bytes:
        """``YYYY-MM-DDTHH:MM:SS.mmmZ`` of a millisecond of the day."""
        second, milli = divmod(ms, 1000)
        text = self._seconds.get(second)
        if text is None:
            hour, rest = divmod(second, 3600)
            text = self._day_prefix + b"%02d:%02d:%02d." % (hour, *divmod(rest, 60))
            self._seconds[second] = text
        return text + _MILLIS[milli]

    def _event(self, event: int) -> tuple[bytes, bytes, bytes, str]:
        """Event id (JSON), partition key (JSON), payload and shape of one event."""
        h = _mix(self._salt ^ event)
        odd = self._odd_ids.get(event)
        if odd is not None:
            event_id = _json(odd)
        elif (h >> 8) % 1000 < NULL_ID_PER_MILLE:
            event_id = b"null"
        else:
            g = _mix(h)
            event_id = b'"%08x-%04x-4%03x-%04x-%012x"' % (
                g >> 32,
                (g >> 16) & 0xFFFF,
                g & 0xFFF,
                0x8000 | (h & 0x3FFF),
                h >> 16,
            )
        if (h >> 12) & 0xFF == 0:
            key = _json(ODD_KEYS[(h >> 20) % len(ODD_KEYS)])
        else:
            key = b'"customer-%05d"' % ((h >> 24) % 20_000)
        forced = self._forced.get(event)
        if forced is not None:
            kind, variant = forced
        else:
            draw = ((h >> 36) & 0xFFFFF) / 0x100000
            kind = _KINDS[min(bisect.bisect_right(_CUMULATIVE, draw), len(_KINDS) - 1)]
            variant = (h >> 56) % len(SHAPES[kind][1])
        template = SHAPES[kind][1][variant]
        if kind == "object":
            items = b",".join(
                _ITEM % ((h >> (8 * i)) % 100_000, 1 + (h >> (3 * i)) % 5)
                for i in range(1 + (h >> 4) % 3)
            )
            ts = self._stamp(max(0, self._arrivals[event] - (h >> 50) % 5_000))
            payload = template % (
                event_id,
                event + 1_000_000,
                (h >> 40) % 100_000,
                _STATUS[h & 3],
                (h >> 9) % 1000,
                (h >> 19) % 100,
                items,
                ts,
            )
        elif kind == "bigint":
            payload = template % (event_id, 10**25 + h * 7_919, 10**20 + h)
        elif kind in _WITH_ID and b"%s" in template:
            payload = template % event_id
        else:
            payload = template
        return event_id, key, payload, kind

    def _line(self, shard: int, k: int) -> tuple[bytes, str]:
        """The landed line of a shard's ``k``-th send, and its payload's shape."""
        send = self._sends[shard][k]
        event_id, key, payload, kind = self._event(send & 0xFFFFFFFF)
        line = (
            b'{"stream":"%s","shard_id":"%s","sequence_number":"%d","subsequence_number":0,'
            b'"partition_key":%s,"arrival_ts":"%s","event_id":%s,"data":%s}\n'
            % (
                self.stream.encode(),
                shard_name(shard).encode(),
                self.sequence(shard, k),
                key,
                self._stamp(send >> 32),
                event_id,
                payload,
            )
        )
        return line, kind

    def _write(self, rel: str, body: bytes) -> None:
        path = self.path(rel)
        if path.parent not in self._dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path.parent)
        # "x": two objects under one key would be a planning bug, never an overwrite.
        with path.open("xb") as out:
            out.write(body)

    def write_phase(self, phase: Literal[1, 2]) -> PhaseReport:
        """Write phase 1 (everything but the late objects) or phase 2 (the late ones)."""
        if phase not in (1, 2):
            raise ValueError(f"phase is 1 or 2: {phase!r}")
        began = time.perf_counter()
        report = PhaseReport(phase)
        for shard in range(SHARDS):
            for r, (start, stop) in enumerate(self._runs[shard]):
                run = (shard, r)
                if (run in self._late) != (phase == 2):
                    continue
                lines, kinds = zip(*(self._line(shard, k) for k in range(start, stop)), strict=True)
                raw = b"".join(lines)
                body = gzip.compress(raw, compresslevel=1, mtime=0)
                rel = self.rel(shard, start, stop)
                damage = run in self._truncated or run in self._corrupt
                if damage and self.damaged and run in self._truncated:
                    body, kept = _truncate(body, len(lines))
                    report.truncated[rel] = (len(lines), kept)
                elif damage and self.damaged:
                    how = self._corrupt[run]
                    body = _corrupt(body, raw, how, random.Random(f"{self.seed}/{rel}"))
                    report.corrupt[rel] = how
                if self.damaged or not damage:
                    self._write(rel, body)
                    report.objects += 1
                    report.lines += len(lines)
                    report.gzip_bytes += len(body)
                    report.shapes.update(kinds)
                    if phase == 2:
                        report.late.append(rel)
                copy = self._copies.get(run)
                if copy is not None:
                    first, last = copy
                    body = gzip.compress(b"".join(lines[first - start : last - start]), 1, mtime=0)
                    copy_rel = self.rel(shard, first, last)
                    self._write(copy_rel, body)
                    report.objects += 1
                    report.lines += last - first
                    report.gzip_bytes += len(body)
                    report.shapes.update(kinds[first - start : last - start])
                    report.transport_copies.append(copy_rel)
        report.seconds = time.perf_counter() - began
        return report


def _truncate(body: bytes, lines: int) -> tuple[bytes, int]:
    """``body`` cut mid-line with at least one complete line before the cut and one lost;
    the cut body and its complete lines."""
    middle = len(body) // 2
    for offset in range(middle + 1):
        for cut in (middle - offset, middle + offset + 1):
            if not 10 < cut < len(body) - 8:
                continue
            inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            text = inflate.decompress(body[:cut]) + inflate.flush()
            complete = text.count(b"\n")
            if not inflate.eof and 1 <= complete < lines and not text.endswith(b"\n"):
                return body[:cut], complete
    raise ValueError("no cut leaves a complete line and a partial one")


def _corrupt(body: bytes, raw: bytes, how: str, rng: random.Random) -> bytes:
    """A corrupt version of ``body`` (whose lines are ``raw``)."""
    if how == "not_gzip":
        return raw  # landed without compression: no gzip magic
    if how == "junk_after":
        return body + b"\x00junk after the stream\n"
    damaged = bytearray(body)
    while read_body(bytes(damaged))[0] != "corrupt":
        # Past the 10-byte header, before the 8-byte trailer.
        for offset in rng.sample(range(10, len(damaged) - 8), min(4, len(damaged) - 18)):
            damaged[offset] ^= 0xFF
    return bytes(damaged)


def generate(
    root: Path,
    size: Size | str = "small",
    seed: int = 0,
    *,
    phase: Literal[1, 2] | None = None,
    damaged: bool = True,
) -> ProdArchive:
    """Plan an archive under ``root`` and write ``phase`` (both phases when None)."""
    archive = ProdArchive(root, size, seed, damaged=damaged)
    for number in (1, 2) if phase is None else (phase,):
        archive.write_phase(number)
    return archive


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.prodlike ROOT [--size S] [--seed N] [--phase P]``: write and report."""
    parser = argparse.ArgumentParser(prog="python -m bench.prodlike", description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("--size", default="small", choices=sorted(SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--phase", type=int, choices=(1, 2))
    parser.add_argument("--no-damage", action="store_true")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    archive = ProdArchive(args.root, args.size, args.seed, damaged=not args.no_damage)
    planned = time.perf_counter() - began
    print(
        f"planned in {planned:.1f} s: {archive.events:,} events, "
        f"{archive.sends:,} sends, "
        f"{len(archive.objects):,} objects; retries {dict(archive.retries)}, "
        f"{archive.dropped_retries} after the day"
    )
    for number in (1, 2) if args.phase is None else (args.phase,):
        report = archive.write_phase(number)
        print(
            f"phase {number}: {report.objects:,} objects, {report.lines:,} lines, "
            f"{report.gzip_bytes / 2**20:,.1f} MiB gzip in {report.seconds:.1f} s; "
            f"truncated {len(report.truncated)}, corrupt {len(report.corrupt)}, "
            f"copies {len(report.transport_copies)}, late {len(report.late)}"
        )
        print(f"  shapes: {dict(report.shapes.most_common())}")
    print(f"total {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
