"""Landed archives on local disk, in the lander's exact format, with the truth about them.

:func:`generate_archive` writes what the lander would have landed for one stream and one
day, under ``root`` (the archive prefix)::

    stream={stream}/dt=YYYY-MM-DD/hour=HH/minute=mm/shard={shard}/{first}-{last}{SUFFIX}

Keys come from the real :func:`~consumer.archive.layout.object_key` and bodies from the
lander's own compressor (:func:`~consumer.landing.batcher.gzip_stream`, level 1). Lines
are built column-wise by a fast path that writes what
:class:`~consumer.landing.envelope.Encoder` writes (json payloads; event id pointer
``/event_id`` when ``event_ids``); ``tests/archive/test_archives.py`` re-encodes every line of
an archive with the real Encoder and requires the same bytes. Runs are cut as the
batcher cuts them: at a minute change and every ``records_per_file`` user records (its
byte and flush rules cannot fire on this data).

What goes in
------------
- Shards ``shardId-000000000000``, ... Each gets ``records_per_minute`` user records per
  minute of each requested hour, arrivals spread uniformly and increasing. Payloads are
  ``{"event_id", "producer", "seq", "ts", "pad"}`` of about ``payload_bytes``; the
  partition key is the producer (five per shard, one hot, one warm, three quiet).
- Sequence numbers grow with arrival inside a shard and keep one length there. Even
  shards have 56 digits (``496...``), odd shards 55 (``5...``): across shards string
  order and integer order disagree, inside a shard they agree.
- ``aggregated_share`` of user records sit in KPL aggregates of 2-6: one sequence
  number, subsequences ``0..k-1``, one arrival. Runs may be cut inside an aggregate.
- ``producer_duplicate_share`` of each shard's user records are re-sends: the same
  payload (so the same event id) again, at a new sequence number of the same shard,
  0.1-5 s after the original. At least one per shard crosses a minute boundary, and
  one an hour boundary between consecutive generated hours (when records allow).
- ``transport_duplicate_share`` of runs get a second object holding a sub-range of the
  run (as a zombie that cut the run elsewhere would land): identical lines, so
  identical ``arrival_ts``, under a different key.

The truth
---------
The truth describes what a *correct reader* recovers; every damage helper keeps it up
to date.

- A file is read with ``zlib.decompressobj(wbits=31)`` (:func:`read_object`). If zlib
  reports an error (not gzip, bad data, bad CRC) the file yields nothing; if the stream
  just stops (truncated) it yields its complete lines; otherwise all its lines.
- A line is a *record* when it is a JSON object with a string ``shard_id``, a
  ``sequence_number`` of 1-128 digits, an integer ``subsequence_number`` and an
  ``arrival_ts`` of the form ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (:func:`parse_record`).
  Anything else is a bad line, to be skipped.
- ``readable_lines``: records a correct reader gets, every copy: a compaction's rows in.
- ``positions``: their distinct ``(shard_id, int(sequence), subsequence)``.
- ``transport_duplicates``: ``readable_lines - len(positions)``; n copies of a position
  count n - 1.
- ``kept``: one record per dedup key (the event id when lines carry one, else the
  position): the one that arrived first, ties broken by ``(shard_id, int(sequence),
  subsequence)``; mapped to its event id (None when lines carry none).
- ``producer_duplicates``: ``len(positions) - len(kept)``, positions dropped because
  their event id arrived earlier at another position. With ``event_ids=False`` a
  compaction cannot see re-sends, so they are kept and this is 0 (``resent`` still
  counts them).

So ``readable_lines == len(kept) + transport_duplicates + producer_duplicates``: rows
in, rows out and drops by cause of a correct compaction. ``lines`` counts the record
lines written, every copy, whatever became of them since.

Long module: one generator whose byte-determinism and truth accounting must stay in one
place: the damage helpers edit the same :class:`Truth` the generator fills, with the same
readers and record order.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Literal, NamedTuple

import orjson

from consumer.archive.layout import object_key
from consumer.landing.deflate import gzip_stream
from consumer.sequence import MAX_SEQUENCE_DIGITS, Position

EVENT_ID_POINTER = "/event_id"
MINUTE_MS = 60_000
HOUR_MS = 3_600_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PRODUCER_WEIGHTS = (8, 4, 2, 1, 1)
AGGREGATE_SIZES = (2, 6)
RESEND_DELAY_MS = (100, 5_000)
EVENT_DELAY_MS = (5, 2_000)
"""How long before its arrival a payload's ``ts`` is."""
SEQUENCE_STEP = 10**26

Pos = tuple[str, int, int]
"""A position: (shard_id, sequence number, subsequence number)."""

_ARRIVAL = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_SEQUENCE = re.compile(f"[0-9]{{1,{MAX_SEQUENCE_DIGITS}}}")
_MILLIS = [b"%03dZ" % milli for milli in range(1000)]
_PAYLOAD = b'{"event_id":"%s","producer":"%s","seq":%d,"ts":"%s%s","pad":"%s"}'
"""A generated payload; ``ts`` is split in second and ``mmmZ``."""


def shard_name(index: int) -> str:
    """The shard id Kinesis gives shard ``index``."""
    return f"shardId-{index:012d}"


class Landed(NamedTuple):
    """What the truth needs of one readable record line."""

    position: Pos
    event_id: str | None
    arrival_ms: int


@dataclass(frozen=True, slots=True)
class Damage:
    """What a damage helper did to one file.

    ``lines``: records a reader got from the file before (for a new file: the good
    records written); ``recoverable``: records it gets now; ``bad_lines``: lines that
    are not records.
    """

    kind: Literal["truncated", "corrupt", "not_gzip", "malformed"]
    lines: int
    recoverable: int
    bad_lines: int = 0


@dataclass
class Truth:
    """What a correct compaction of an archive must produce (see the module docstring)."""

    stream: str
    day: date
    hours: list[int]
    event_ids: bool
    shards: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    """Every data object written: runs, transport copies, late and damaged files."""
    lines: int = 0
    readable_lines: int = 0
    bad_lines: int = 0
    positions: set[Pos] = field(default_factory=set)
    kept: dict[Pos, str | None] = field(default_factory=dict)
    transport_duplicates: int = 0
    producer_duplicates: int = 0
    resent: int = 0
    """Re-sends written (producer duplicates, whether a compaction can see them or not)."""
    aggregated: int = 0
    """User records written inside KPL aggregates of two or more."""
    runs: int = 0
    """Objects written for runs, transport copies not included."""
    transport_files: int = 0
    """Second objects written for a run (transport copies)."""
    kept_per_hour: dict[int, int] = field(default_factory=dict)
    """``kept`` counted by the arrival hour (UTC, on ``day``) of each kept record."""
    damaged: dict[Path, Damage] = field(default_factory=dict)
    late: list[Path] = field(default_factory=list)
    # Sparse indexes, so damage can be accounted for without one entry per record:
    # readable copies of the positions that have two or more, and the members (in
    # winning order) of the event ids readable at two or more positions.
    _copies: dict[Pos, int] = field(default_factory=dict, repr=False)
    _groups: dict[str, list[tuple[int, str, int, int]]] = field(default_factory=dict, repr=False)

    def _hour(self, arrival_ms: int) -> int:
        return (arrival_ms - _day_ms(self.day)) // HOUR_MS

    def _count_kept(self, arrival_ms: int, change: int) -> None:
        hour = self._hour(arrival_ms)
        count = self.kept_per_hour.get(hour, 0) + change
        if count:
            self.kept_per_hour[hour] = count
        else:
            self.kept_per_hour.pop(hour, None)

    def _add(self, record: Landed) -> None:
        """Count a readable line: another copy of a position, or a new event."""
        position = record.position
        if position in self.positions:
            self._add_copy(position)
            return
        self.readable_lines += 1
        # Helpers only land new events, so a new position is always kept.
        self.positions.add(position)
        self.kept[position] = record.event_id
        self._count_kept(record.arrival_ms, 1)

    def _add_copy(self, position: Pos) -> None:
        """Count a readable copy of a position already counted."""
        self.readable_lines += 1
        self._copies[position] = self._copies.get(position, 1) + 1
        self.transport_duplicates += 1

    def _remove(self, record: Landed) -> None:
        """Forget one readable copy; when it was the last, the next copy of its event wins."""
        self.readable_lines -= 1
        position = record.position
        copies = self._copies.pop(position, 0)
        if copies:
            self.transport_duplicates -= 1
            if copies > 2:
                self._copies[position] = copies - 1
            return
        self.positions.remove(position)
        event_id = record.event_id
        members = self._groups.get(event_id) if event_id is not None else None
        if members is not None:
            members.remove(_order(record))
        if position not in self.kept:
            self.producer_duplicates -= 1
        else:
            del self.kept[position]
            self._count_kept(record.arrival_ms, -1)
            if members:
                arrival_ms, shard_id, sequence, subsequence = members[0]
                self.kept[(shard_id, sequence, subsequence)] = event_id
                self.producer_duplicates -= 1
                self._count_kept(arrival_ms, 1)
        if event_id is not None and members is not None and len(members) < 2:
            del self._groups[event_id]


def _order(record: Landed) -> tuple[int, str, int, int]:
    """Which copy of an event wins: earliest arrival, then shard, sequence, subsequence."""
    return (record.arrival_ms, *record.position)


def _day_ms(day: date) -> int:
    return (day.toordinal() - date(1970, 1, 1).toordinal()) * 24 * HOUR_MS


def _when(ms: int) -> datetime:
    # Integer arithmetic: a float timestamp could print 122 ms for 123.
    return EPOCH + timedelta(milliseconds=ms)


# ---------------------------------------------------------------- reading objects


class ObjectRead(NamedTuple):
    """What a correct reader gets from one object."""

    state: Literal["ok", "truncated", "error"]
    lines: list[bytes]
    """Complete lines, each ending in ``\\n`` (none when ``state`` is ``error``)."""


def read_object(path: Path) -> ObjectRead:
    """Read one object as the truth's reader does (see the module docstring)."""
    inflate = zlib.decompressobj(wbits=31)
    try:
        text = inflate.decompress(path.read_bytes())
    except zlib.error:
        return ObjectRead("error", [])
    # The lander writes one gzip member; bytes after it are not the lander's.
    if inflate.eof and inflate.unused_data:
        return ObjectRead("error", [])
    # The last part is the unterminated tail: empty for a whole file, partial if cut.
    lines = [part + b"\n" for part in text.split(b"\n")[:-1]]
    return ObjectRead("ok" if inflate.eof else "truncated", lines)


def parse_record(line: bytes) -> Landed | None:
    """The record a line holds, or None for a line that is not a landed record."""
    try:
        document = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    shard_id, sequence = document.get("shard_id"), document.get("sequence_number")
    subsequence, arrival = document.get("subsequence_number"), document.get("arrival_ts")
    event_id = document.get("event_id")
    if (
        not isinstance(shard_id, str)
        or not isinstance(sequence, str)
        or not _SEQUENCE.fullmatch(sequence)
        or type(subsequence) is not int
        or subsequence < 0
        or not isinstance(arrival, str)
        or not _ARRIVAL.fullmatch(arrival)
        or not (event_id is None or isinstance(event_id, str))
    ):
        return None
    try:
        when = datetime.strptime(arrival, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:  # month 13 and the like
        return None
    arrival_ms = (when - EPOCH) // timedelta(milliseconds=1)
    return Landed((shard_id, int(sequence), subsequence), event_id, arrival_ms)


def read_records(path: Path) -> list[Landed]:
    """The records a correct reader recovers from one object."""
    return [record for line in read_object(path).lines if (record := parse_record(line))]


# ---------------------------------------------------------------- generating


class _Seconds(dict[int, bytes]):
    """``YYYY-MM-DDTHH:MM:SS.`` of an epoch second, formatted once per second."""

    def __missing__(self, second: int) -> bytes:
        text = _when(second * 1000).strftime("%Y-%m-%dT%H:%M:%S.").encode()
        self[second] = text
        return text


@dataclass(slots=True)
class _Source:
    """The fresh (not re-sent) user records of one shard, by index in arrival order."""

    event_ids: list[str]
    keys: list[bytes]
    """The partition key (the producer) as JSON."""
    tails: list[bytes]
    """The end of the record's line: ``,"event_id":...`` if any, and ``"data"``."""


@dataclass(slots=True)
class _Records:
    """Every user record of one shard in arrival order, column by column."""

    shard_id: str
    arrivals: list[int] = field(default_factory=list)
    sequences: list[int] = field(default_factory=list)
    subsequences: list[int] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    """Index in the ``_Source`` of the record's payload."""
    resend_of: dict[int, int] = field(default_factory=dict)
    """Index of each re-send -> index of its original."""

    def append(self, arrival: int, sequence: int, subsequence: int, source: int) -> None:
        self.arrivals.append(arrival)
        self.sequences.append(sequence)
        self.subsequences.append(subsequence)
        self.sources.append(source)

    def positions(self) -> list[Pos]:
        count = len(self.sequences)
        return list(
            zip(
                itertools.repeat(self.shard_id, count),
                self.sequences,
                self.subsequences,
                strict=True,
            )
        )

    def order(self, k: int) -> tuple[int, str, int, int]:
        return (self.arrivals[k], self.shard_id, self.sequences[k], self.subsequences[k])


def _sequence_base(index: int) -> int:
    # Even shards: 56 digits "496..."; odd shards: 55 digits "5...". Within a shard the
    # length never changes: its numbers grow by far less than 10**49.
    if index % 2 == 0:
        return 496 * 10**53 + index * 10**49
    return 5 * 10**54 + index * 10**49


def _fresh(
    rng: random.Random,
    index: int,
    arrivals: list[int],
    *,
    payload_bytes: int,
    event_ids: bool,
    prefix: str = "",
) -> _Source:
    """Producers, event ids and payloads of fresh records arriving at ``arrivals``.

    Column by column, in comprehensions: this and ``_lines`` are the generator's hot
    path.
    """
    count = len(arrivals)
    names = [b"producer-%d-%d" % (index, j) for j in range(len(PRODUCER_WEIGHTS))]
    producers = rng.choices(names, weights=PRODUCER_WEIGHTS, k=count)
    counters = {name: itertools.count(1) for name in names}
    seqs = [next(counters[producer]) for producer in producers]
    noise = rng.randbytes(8 * count).hex()
    ids = [f"{prefix}{index:03x}-{i:07x}-{noise[16 * i : 16 * i + 16]}" for i in range(count)]
    low, high = EVENT_DELAY_MS
    uniform = rng.random
    stamps = [arrival - low - int(uniform() * (high - low)) for arrival in arrivals]
    # Ids, producers and stamps have fixed widths, so a payload's length varies only
    # with the digits of its seq: look the padding up by seq.
    sample = _PAYLOAD % (ids[0].encode() if ids else b"", names[0], 0, b"-" * 20, b"000Z", b"")
    fixed = len(sample) - 1
    pads = [b"x" * size for size in range(payload_bytes + 1)]
    pad_of = [
        pads[max(0, payload_bytes - fixed - len(str(n)))] for n in range(max(seqs, default=0) + 1)
    ]
    # As Encoder.encode: the event id as JSON when a pointer is set (these ids need no
    # escaping; "%.0s" swallows it otherwise), then the payload spliced unchanged.
    tail = (b',"event_id":"%s"' if event_ids else b"%.0s") + b',"data":' + _PAYLOAD + b"}\n"
    seconds = _Seconds()
    tails = [
        tail
        % (encoded, encoded, producer, seq, seconds[ts // 1000], _MILLIS[ts % 1000], pad_of[seq])
        for encoded, producer, seq, ts in zip(
            (event_id.encode() for event_id in ids), producers, seqs, stamps, strict=True
        )
    ]
    keys = {name: orjson.dumps(name.decode()) for name in names}
    return _Source(ids, [keys[producer] for producer in producers], tails)


def _lines(stream: str, records: _Records, source: _Source) -> list[bytes]:
    """The lander's line of every record (what Encoder.encode returns for it)."""
    head = b'{"stream":%s,"shard_id":%s,"sequence_number":"' % (
        orjson.dumps(stream),
        orjson.dumps(records.shard_id),
    )
    seconds = _Seconds()
    keys, tails = source.keys, source.tails
    return [
        b'%s%d","subsequence_number":%d,"partition_key":%s,"arrival_ts":"%s%s"%s'
        % (head, sequence, sub, keys[s], seconds[ms // 1000], _MILLIS[ms % 1000], tails[s])
        for ms, sequence, sub, s in zip(
            records.arrivals, records.sequences, records.subsequences, records.sources, strict=True
        )
    ]


def _aggregate(rng: random.Random, arrivals: list[int], share: float) -> list[int]:
    """The subsequence of each fresh record once some are packed into KPL aggregates.

    Members of an aggregate take its first record's arrival: it is one Kinesis record.
    """
    subsequences = [0] * len(arrivals)
    if share <= 0:
        return subsequences
    low, high = AGGREGATE_SIZES
    mean = (low + high) / 2
    # Starting an aggregate at a record with probability q puts a share
    # q*mean / (q*mean + 1 - q) of records inside aggregates: solve for ``share``.
    # The plain records between two starts are then geometric: skip them in one step.
    log_plain = math.log1p(-share / (mean - share * (mean - 1)))

    def plain() -> int:
        return int(math.log(1.0 - rng.random()) / log_plain)

    i = plain()
    while i < len(arrivals):
        size = min(rng.randint(low, high), len(arrivals) - i)
        for sub in range(1, size):
            arrivals[i + sub] = arrivals[i]
            subsequences[i + sub] = sub
        i += size + plain()
    return subsequences


def _resends(
    rng: random.Random, arrivals: list[int], count: int, hours: list[int], day_ms: int
) -> list[tuple[int, int]]:
    """(arrival, original) of ``count`` re-sends, 0.1-5 s after distinct originals.

    First one across each boundary between consecutive generated hours and one across
    a minute boundary, then random ones; all arrive inside the generated hours.
    """
    low, high = RESEND_DELAY_MS
    boundaries = [day_ms + hour * HOUR_MS for hour in hours if hour - 1 in hours]
    boundaries.append(day_ms + rng.choice(hours) * HOUR_MS + rng.randint(1, 59) * MINUTE_MS)
    chosen: dict[int, int] = {}
    for boundary in boundaries:
        # The last record at least 0.1 s before the boundary, if it is close enough.
        i = bisect.bisect_right(arrivals, boundary - low) - 1
        if len(chosen) < count and i >= 0 and boundary - arrivals[i] <= high:
            chosen.setdefault(i, rng.randint(boundary, arrivals[i] + high))
    attempts = 0
    while len(chosen) < count:
        attempts += 1
        if attempts > 100 * count:
            raise ValueError("cannot place that many re-sends inside the generated hours")
        i = rng.randrange(len(arrivals))
        arrival = arrivals[i] + rng.randint(low, high)
        if i not in chosen and (arrival - day_ms) // HOUR_MS in hours:
            chosen[i] = arrival
    return sorted((arrival, i) for i, arrival in chosen.items())


def _plan(
    rng: random.Random,
    shard_id: str,
    index: int,
    *,
    arrivals: list[int],
    subsequences: list[int],
    resends: list[tuple[int, int]],
) -> _Records:
    """Insert the re-sends among the fresh records by arrival; number Kinesis records."""
    records = _Records(shard_id)
    # bisect_right: a re-send on the millisecond of fresh records (maybe a whole
    # aggregate) goes after them.
    points = [bisect.bisect_right(arrivals, arrival) for arrival, _ in resends]
    done = 0
    for j, ((arrival, original), point) in enumerate(zip(resends, points, strict=True)):
        records.arrivals += arrivals[done:point]
        records.subsequences += subsequences[done:point]
        records.sources += range(done, point)
        records.arrivals.append(arrival)
        records.subsequences.append(0)
        records.sources.append(original)
        # Fresh record f moved down by one for each re-send inserted at or before it.
        records.resend_of[point + j] = original + bisect.bisect_right(points, original)
        done = point
    records.arrivals += arrivals[done:]
    records.subsequences += subsequences[done:]
    records.sources += range(done, len(arrivals))
    # One sequence number per Kinesis record (each one starts at subsequence 0),
    # increasing by a step plus noise smaller than the step.
    ordinals = list(itertools.accumulate(sub == 0 for sub in records.subsequences))
    base, noise = _sequence_base(index), rng.getrandbits
    jitter = [noise(64) for _ in range(ordinals[-1] + 1 if ordinals else 0)]
    records.sequences = [base + k * SEQUENCE_STEP + jitter[k] for k in ordinals]
    return records


def _runs(arrivals: list[int], minutes: list[int], records_per_file: int) -> list[tuple[int, int]]:
    """[start, stop) of each run: cut at each minute and every ``records_per_file``."""
    edges = [bisect.bisect_left(arrivals, minute) for minute in minutes[1:]]
    return [
        (start, min(start + records_per_file, stop))
        for first, stop in itertools.pairwise([0, *edges, len(arrivals)])
        for start in range(first, stop, records_per_file)
    ]


def gzip_body(lines: Iterable[bytes]) -> bytes:
    """The lander's gzip body of some lines (level 1, no name, mtime 0)."""
    compressor = gzip_stream()
    return compressor.compress(b"".join(lines)) + compressor.flush()


class _Writer:
    """Lands objects of one archive and lists them in the truth."""

    def __init__(self, root: Path, truth: Truth) -> None:
        self.root = root
        self.truth = truth
        self._dirs: set[Path] = set()

    def land(self, records: _Records, start: int, stop: int, lines: Sequence[bytes]) -> Path:
        """Write ``lines`` as the object of ``records[start:stop]`` (one minute)."""
        last = stop - 1
        key = object_key(
            "",
            self.truth.stream,
            records.shard_id,
            _when(records.arrivals[start] // MINUTE_MS * MINUTE_MS),
            first=Position(records.sequences[start], records.subsequences[start]),
            last=Position(records.sequences[last], records.subsequences[last]),
        )
        return self.write(key, gzip_body(lines))

    def write(self, key: str, body: bytes) -> Path:
        """Write a body at a key that must be new."""
        path = self.root / key
        if path.parent not in self._dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dirs.add(path.parent)
        # "x": two objects under one key would be a generator bug, never an overwrite.
        with path.open("xb") as out:
            out.write(body)
        self.truth.files.append(path)
        return path


def generate_archive(
    root: Path,
    *,
    stream: str = "orders",
    day: date,
    hours: Sequence[int],
    shards: int = 4,
    records_per_minute: int,
    records_per_file: int,
    payload_bytes: int = 200,
    event_ids: bool = True,
    transport_duplicate_share: float = 0.0,
    producer_duplicate_share: float = 0.0,
    aggregated_share: float = 0.0,
    seed: int = 0,
) -> Truth:
    """Land one day of a stream under ``root`` and return the truth about it.

    ``records_per_minute`` is per shard, re-sends included. Shares are fractions: of
    runs for transport copies, of each shard's user records for re-sends and for
    records inside aggregates. The same arguments always write the same bytes.
    """
    if records_per_minute < 1 or records_per_file < 1:
        raise ValueError("records_per_minute and records_per_file must be at least 1")
    if not hours or not set(hours) <= set(range(24)) or len(set(hours)) != len(hours):
        raise ValueError(f"hours must be distinct values in 0..23: {hours!r}")
    if not 0 <= producer_duplicate_share < 0.5:
        raise ValueError("producer_duplicate_share must be in [0, 0.5)")
    if not 0 <= transport_duplicate_share <= 1 or not 0 <= aggregated_share < 1:
        raise ValueError("transport share must be in [0, 1], aggregated share in [0, 1)")
    truth = Truth(stream, day, sorted(hours), event_ids)
    day_ms = _day_ms(day)
    minutes = [day_ms + hour * HOUR_MS + m * MINUTE_MS for hour in truth.hours for m in range(60)]
    writer = _Writer(root, truth)
    for index in range(shards):
        rng = random.Random(f"{seed}/{index}")
        records, source = _shard(
            rng,
            truth,
            index,
            minutes=minutes,
            records_per_minute=records_per_minute,
            payload_bytes=payload_bytes,
            aggregated_share=aggregated_share,
            producer_duplicate_share=producer_duplicate_share,
        )
        positions = _count_shard(truth, records, source)
        _land_shard(
            rng,
            writer,
            records,
            positions=positions,
            lines=_lines(stream, records, source),
            runs=_runs(records.arrivals, minutes, records_per_file),
            transport_share=transport_duplicate_share,
        )
    return truth


def _shard(
    rng: random.Random,
    truth: Truth,
    index: int,
    *,
    minutes: list[int],
    records_per_minute: int,
    payload_bytes: int,
    aggregated_share: float,
    producer_duplicate_share: float,
) -> tuple[_Records, _Source]:
    """Every user record of one shard, and the payloads they carry."""
    shard_id = shard_name(index)
    truth.shards.append(shard_id)
    total = records_per_minute * len(minutes)
    uniform = rng.random
    slots = [
        start + offset
        for start in minutes
        for offset in sorted(int(uniform() * MINUTE_MS) for _ in range(records_per_minute))
    ]
    # Free the slots the re-sends will take, at random, so the rate stays even.
    resend_count = round(producer_duplicate_share * total)
    freed = set(rng.sample(range(total), resend_count))
    arrivals = [ms for i, ms in enumerate(slots) if i not in freed]
    subsequences = _aggregate(rng, arrivals, aggregated_share)
    # An aggregate's members: its first record, then those at subsequence 1 and up.
    truth.aggregated += sum(2 if sub == 1 else 1 for sub in subsequences if sub)
    source = _fresh(rng, index, arrivals, payload_bytes=payload_bytes, event_ids=truth.event_ids)
    resends = _resends(rng, arrivals, resend_count, truth.hours, _day_ms(truth.day))
    records = _plan(
        rng, shard_id, index, arrivals=arrivals, subsequences=subsequences, resends=resends
    )
    return records, source


def _land_shard(
    rng: random.Random,
    writer: _Writer,
    records: _Records,
    *,
    positions: list[Pos],
    lines: list[bytes],
    runs: list[tuple[int, int]],
    transport_share: float,
) -> None:
    """Land each run, and a transport copy of some; count the copies in the truth."""
    truth = writer.truth
    # Spread the rounding over shards so the archive holds round(share * runs) copies;
    # only a run of two or more records can be cut differently.
    wanted = round(transport_share * (truth.runs + len(runs))) - truth.transport_files
    eligible = [r for r, (start, stop) in enumerate(runs) if stop - start >= 2]
    copied = set(rng.sample(eligible, min(max(wanted, 0), len(eligible))))
    for r, (start, stop) in enumerate(runs):
        writer.land(records, start, stop, lines[start:stop])
        truth.runs += 1
        if r in copied:
            cut = rng.randint(start + 1, stop - 1)
            first, last = (start, cut) if rng.random() < 0.5 else (cut, stop)
            writer.land(records, first, last, lines[first:last])
            truth.transport_files += 1
            truth.lines += last - first
            for position in positions[first:last]:
                truth._add_copy(position)


def _count_shard(truth: Truth, records: _Records, source: _Source) -> list[Pos]:
    """Add one shard's records (first copies) to the truth, in bulk; their positions."""
    count = len(records.sequences)
    positions = records.positions()
    truth.lines += count
    truth.readable_lines += count
    truth.resent += len(records.resend_of)
    truth.positions.update(positions)
    ids: list[str | None] = (
        [source.event_ids[s] for s in records.sources] if truth.event_ids else [None] * count
    )
    kept = [True] * count
    day_ms = _day_ms(truth.day)
    for hour in truth.hours:
        start = day_ms + hour * HOUR_MS
        inside = bisect.bisect_left(records.arrivals, start + HOUR_MS) - bisect.bisect_left(
            records.arrivals, start
        )
        truth._count_kept(start, inside)
    if truth.event_ids:
        for resend, original in records.resend_of.items():
            kept[resend] = False
            truth._count_kept(records.arrivals[resend], -1)
            truth._groups[source.event_ids[records.sources[resend]]] = [
                records.order(original),
                records.order(resend),
            ]
        truth.producer_duplicates += len(records.resend_of)
    truth.kept.update(
        zip(itertools.compress(positions, kept), itertools.compress(ids, kept), strict=True)
    )
    return positions


# ---------------------------------------------------------------- damage


def _account(truth: Truth, path: Path, before: list[Landed]) -> list[Landed]:
    """Bring the truth from ``before`` to what ``path`` yields now; return the latter."""
    after = read_records(path)
    now = {record.position for record in after}
    then = {record.position for record in before}
    for record in before:
        if record.position not in now:
            truth._remove(record)
    for record in after:
        if record.position not in then:
            truth._add(record)
    return after


def truncate(truth: Truth, path: Path, keep_fraction: float) -> Damage:
    """Keep the first ``keep_fraction`` of the file's bytes, as an interrupted upload would.

    The complete lines zlib still yields stay readable; the rest are lost, unless
    another copy of them is readable elsewhere.
    """
    if not 0 <= keep_fraction < 1:
        raise ValueError(f"keep_fraction must be in [0, 1): {keep_fraction}")
    before = read_records(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep_fraction)])
    after = _account(truth, path, before)
    damage = Damage("truncated", len(before), len(after))
    truth.damaged[path] = damage
    return damage


def corrupt(truth: Truth, path: Path, seed: int = 0) -> Damage:
    """Flip bytes in the middle of the file until its gzip stream fails.

    A reader cannot trust any line of a stream that fails (bad data, bad CRC), so all
    its records are lost, unless another copy of them is readable elsewhere.
    """
    before = read_records(path)
    data = bytearray(path.read_bytes())
    rng = random.Random(f"corrupt/{seed}/{path.name}")
    while read_object(path).state != "error":
        # The middle half: past the 10-byte header, before the 8-byte trailer.
        for offset in rng.sample(range(len(data) // 4, 3 * len(data) // 4 + 1), 4):
            data[offset] ^= 0xFF
        path.write_bytes(bytes(data))
    after = _account(truth, path, before)
    damage = Damage("corrupt", len(before), len(after))
    truth.damaged[path] = damage
    return damage


def _new_shard(truth: Truth) -> tuple[int, str]:
    index = len(truth.shards)
    truth.shards.append(shard_name(index))
    return index, truth.shards[-1]


def _minute(truth: Truth, hour: int, minute: int) -> int:
    if hour not in truth.hours or not 0 <= minute < 60:
        raise ValueError(f"hour {hour} minute {minute} is not in the generated archive")
    return _day_ms(truth.day) + hour * HOUR_MS + minute * MINUTE_MS


def not_gzip(
    truth: Truth, root: Path, *, hour: int, minute: int = 0, size: int = 4096, seed: int = 0
) -> Path:
    """A file under a valid key (a new shard) holding plain garbage: no records."""
    start = _minute(truth, hour, minute)
    index, shard_id = _new_shard(truth)
    rng = random.Random(f"not_gzip/{seed}")
    base = _sequence_base(index)
    key = object_key(
        "", truth.stream, shard_id, _when(start), first=Position(base + 1), last=Position(base + 2)
    )
    # Never the gzip magic, so no reader can take it for gzip.
    body = b"garbage:" + rng.randbytes(max(0, size - 8))
    path = _Writer(root, truth).write(key, body)
    truth.damaged[path] = Damage("not_gzip", 0, 0)
    return path


def _new_records(
    truth: Truth, *, index: int, start: int, count: int, payload_bytes: int, seed: str
) -> tuple[_Records, _Source]:
    """``count`` new plain records (new event ids) of shard ``index`` in one minute."""
    rng = random.Random(seed)
    arrivals = sorted(start + rng.randrange(MINUTE_MS) for _ in range(count))
    source = _fresh(
        rng,
        index,
        arrivals,
        payload_bytes=payload_bytes,
        event_ids=truth.event_ids,
        prefix=f"{seed}-",
    )
    records = _Records(shard_name(index))
    sequence = _sequence_base(index)
    for i, arrival in enumerate(arrivals):
        sequence += SEQUENCE_STEP + rng.getrandbits(64)
        records.append(arrival, sequence, 0, i)
    return records, source


def _count_new(truth: Truth, records: _Records, source: _Source, stop: int) -> None:
    """Count ``records[:stop]``, written once each, in the truth."""
    truth.lines += stop
    for k, position in enumerate(records.positions()[:stop]):
        event_id = source.event_ids[records.sources[k]] if truth.event_ids else None
        truth._add(Landed(position, event_id, records.arrivals[k]))


def add_late_file(
    truth: Truth,
    root: Path,
    hour: int,
    *,
    minute: int = 30,
    records: int = 100,
    payload_bytes: int = 200,
    seed: int = 0,
) -> Path:
    """Land new records (a new shard, new event ids) in an hour generated before.

    As a consumer that fell behind would: the hour is already in the archive when this
    file appears, so a compaction that ran before it misses these records.
    """
    start = _minute(truth, hour, minute)
    index, _ = _new_shard(truth)
    late, source = _new_records(
        truth,
        index=index,
        start=start,
        count=records,
        payload_bytes=payload_bytes,
        seed=f"late{len(truth.late)}s{seed}",
    )
    lines = _lines(truth.stream, late, source)
    path = _Writer(root, truth).land(late, 0, records, lines)
    _count_new(truth, late, source, records)
    truth.late.append(path)
    return path


NOT_JSON = (b"not json at all\n", b'{"stream": "orders", "shard_id": "shardId-0000\n')
"""Lines that are not JSON (the second is cut mid-string)."""


def malformed(
    truth: Truth,
    root: Path,
    *,
    hour: int,
    minute: int = 15,
    good: int = 20,
    payload_bytes: int = 200,
    seed: int = 0,
) -> Path:
    """A gzip file (a new shard) mixing ``good`` records with lines that are not records.

    Among the good lines: two lines that are not JSON, a record without
    ``sequence_number``, and two whose ``arrival_ts`` is no timestamp (month 13, a
    word). Only the good lines count.
    """
    start = _minute(truth, hour, minute)
    index, _ = _new_shard(truth)
    # The bad records take positions too (after the good ones): plan three more.
    records, source = _new_records(
        truth,
        index=index,
        start=start,
        count=good + 3,
        payload_bytes=payload_bytes,
        seed=f"bad{index}s{seed}",
    )
    lines = _lines(truth.stream, records, source)
    no_sequence, month_13, word = (orjson.loads(line) for line in lines[good:])
    del no_sequence["sequence_number"]
    month_13["arrival_ts"] = month_13["arrival_ts"][:5] + "13" + month_13["arrival_ts"][7:]
    word["arrival_ts"] = "yesterday"
    bad = [*NOT_JSON, *(orjson.dumps(doc) + b"\n" for doc in (no_sequence, month_13, word))]
    mixed = lines[:good]
    rng = random.Random(f"malformed/{seed}")
    for line in bad:
        mixed.insert(rng.randint(0, len(mixed)), line)
    path = _Writer(root, truth).land(records, 0, good + 3, mixed)
    _count_new(truth, records, source, good)
    truth.bad_lines += len(bad)
    truth.damaged[path] = Damage("malformed", good, good, len(bad))
    return path
