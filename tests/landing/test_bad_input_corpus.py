"""The bad-input corpus (tests/support/corpus.py) through the real lander.

Every case is followed by a good record on the same shard. The good record must land
after it (the shard never stalls), the case must land or be dead-lettered as the
corpus says, and the lander's counters must count it. The archive is read back with
gzip and json only, never with the project's code.

- one fast test per case and payload format: the shard reader on the in-memory stream
  feeding the lander, landing into a folder;
- the whole corpus through the real Worker, per payload format, on the in-memory stream;
- the whole corpus on kinesalite, landed into S3 by one ``lander run`` process, checked
  against the archive and the worker's /metrics.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import re
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from consumer.cli.harness import wait_until
from consumer.config import load_settings
from consumer.landing.envelope import DeadLetter, Encoder
from consumer.landing.files import FileObjectStore
from consumer.landing.lander import Lander
from consumer.leases.memory import MemoryLeaseStore
from consumer.lifecycle.processor import InitializationInput, ProcessRecordsInput, RecordProcessor
from consumer.lifecycle.worker import Worker
from consumer.metrics import LanderMetrics
from consumer.sequence import Position, Sentinel
from consumer.stream.memory import MAX_HASH, MemoryStream
from consumer.stream.reader import ShardReader
from consumer.stream.records import Record
from tests.support.cluster import Cluster
from tests.support.corpus import CASES, MAX_RECORD, MODES, POINTER, Case, Mode, by_name, good

SHARD = "shardId-000000000000"
Position3 = tuple[str, str, int]
"""(shard id, sequence number as landed, subsequence number)."""


def _id(case: Case) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", case.name).strip("-")


def _params() -> list[Any]:
    params = []
    for case in CASES:
        for mode in MODES:
            broken = case.broken(mode)
            marks = [pytest.mark.xfail(strict=True, reason=broken)] if broken else []
            params.append(pytest.param(case, mode, id=f"{_id(case)}-{mode}", marks=marks))
    return params


# -- reading the archive back (gzip + json only) -------------------------------------


@contextlib.contextmanager
def _deep() -> Iterator[None]:
    """Room for Python's json (and ==) on the 1,024-deep payload orjson lets through."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 5000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def _loads(text: bytes) -> Any:
    with _deep():
        return json.loads(text)


@dataclass
class Archive:
    """Every line of the archive, by position: landed lines and dead letters."""

    landed: dict[Position3, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    dead: dict[Position3, tuple[dict[str, Any], bytes]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, objects: Iterable[tuple[str, bytes]]) -> Archive:
        archive = cls()
        for key, body in objects:
            text = gzip.decompress(body)
            if text and not text.endswith(b"\n"):
                archive.problems.append(f"{key}: last line not terminated")
            lines = text.split(b"\n")[:-1] if text else []
            target = archive.dead if "dead-letter/" in key else archive.landed
            for raw in lines:
                if b"\r" in raw:
                    archive.problems.append(f"{key}: a raw CR inside a line")
                line = _loads(raw)
                position = (line["shard_id"], line["sequence_number"], line["subsequence_number"])
                if position in archive.landed or position in archive.dead:
                    archive.problems.append(f"{position} archived twice")
                target[position] = (line, raw)
        return archive

    def __len__(self) -> int:
        return len(self.landed) + len(self.dead)


def _same(left: Any, right: Any) -> bool:
    with _deep():
        return bool(left == right)


def _folder_objects(root: Path) -> Iterator[tuple[str, bytes]]:
    for path in sorted(root.rglob("*.jsonl.gz")):
        if not path.name.startswith(".tmp-"):
            yield path.relative_to(root).as_posix(), path.read_bytes()


# -- what the corpus expects ---------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    """A case as put on the stream: where its user records are."""

    case: Case
    shard: str
    sequence: int


def _check(placed: Placed, mode: Mode, archive: Archive) -> list[str]:
    """How the archive differs from what the corpus says of this case (empty: it agrees)."""
    case, problems = placed.case, []
    for sub, (outcome, (key, data)) in enumerate(
        zip(case.outcomes(mode), case.user_records, strict=True)
    ):
        where = f"{case.name!r}[{sub}] ({mode})"
        position = (placed.shard, str(placed.sequence), sub)
        landed, dead = archive.landed.get(position), archive.dead.get(position)
        if outcome.kind == "dead":
            if dead is None or landed is not None:
                found = "landed" if landed else "nothing"
                problems.append(f"{where}: expected a dead letter, found {found}")
                continue
            line = dead[0]
            if not line["reason"].startswith(outcome.reason):
                problems.append(f"{where}: reason {line['reason']!r}, not {outcome.reason!r}…")
            if base64.b64decode(line["data_base64"]) != data:
                problems.append(f"{where}: the dead letter does not hold the record's bytes")
        else:
            if landed is None or dead is not None:
                found = f"a dead letter ({dead[0]['reason']})" if dead else "nothing"
                problems.append(f"{where}: expected to land, found {found}")
                continue
            line, raw = landed
            if line.get("event_id", "absent") != outcome.event_id:
                problems.append(f"{where}: event_id {line.get('event_id', 'absent')!r}")
            if outcome.kind == "raw":
                if base64.b64decode(line["data"]) != data:
                    problems.append(f"{where}: base64 data differs from the payload")
            elif not _same(line["data"], _loads(data)):
                problems.append(f"{where}: landed data differs from the payload's value")
            elif (
                b"\n" not in data
                and b"\r" not in data
                and not raw.endswith(b',"data":' + data.strip(b" \t") + b"}")
            ):
                problems.append(f"{where}: a one-line payload not spliced verbatim")
        line = (dead or landed or ({}, b""))[0]
        if line.get("partition_key") != key:
            problems.append(f"{where}: partition key {line.get('partition_key')!r}")
    return problems


@dataclass
class Expected:
    """Totals over a set of placed cases."""

    landed: int = 0
    dead: int = 0
    user_records: int = 0

    @classmethod
    def of(cls, placed: Iterable[Placed], mode: Mode) -> Expected:
        total = cls()
        for one in placed:
            total.dead += one.case.count(mode, "dead")
            total.user_records += len(one.case.user_records)
        total.landed = total.user_records - total.dead
        return total


def _verify(placed: list[Placed], mode: Mode, archive: Archive) -> None:
    problems = list(archive.problems)
    for one in placed:
        problems += _check(one, mode, archive)
    expected = Expected.of(placed, mode)
    if len(archive.landed) != expected.landed or len(archive.dead) != expected.dead:
        problems.append(
            f"archive holds {len(archive.landed)} lines and {len(archive.dead)} dead letters, "
            f"expected {expected.landed} and {expected.dead}"
        )
    assert not problems, "\n".join(problems)


def _settings(mode: Mode, **extra: Any) -> Any:
    return load_settings(
        stream="corpus",
        lease_table="corpus-leases",
        payload_format=mode,
        event_id_pointer=POINTER,
        **extra,
    )


# -- the corpus itself ---------------------------------------------------------------


def test_corpus_is_well_formed() -> None:
    """Unique names; what Kinesis itself accepts: keys of 1-256 characters (UTF-16
    units, as kinesalite counts them), data plus key at most 1 MiB, and the 1 MiB case
    exactly at that limit."""
    named = by_name()
    for case in CASES:
        assert 1 <= len(case.partition_key.encode("utf-16-le", "surrogatepass")) // 2 <= 256
        size = len(case.data) + len(case.partition_key.encode("utf-8", "surrogatepass"))
        assert size <= MAX_RECORD, case.name
    big = named["1 MiB record"]
    assert len(big.data) + len(big.partition_key.encode()) == MAX_RECORD


# -- one case at a time: the shard reader on the in-memory stream, then the lander ---


class Checkpoints:
    """A checkpointer whose lease is never lost; remembers each checkpoint."""

    def __init__(self) -> None:
        self.positions: list[Position] = []

    async def ensure_lease(self) -> None:
        return None

    async def checkpoint(self, position: Position | None = None) -> None:
        assert position is not None
        self.positions.append(position)


@pytest.mark.parametrize(("case", "mode"), _params())
async def test_case_is_landed_or_dead_lettered_and_the_shard_moves_on(
    case: Case, mode: Mode, tmp_path: Path
) -> None:
    """The case, then a good record, as two GetRecords pages of one shard: the case
    ends as the corpus says, the good record lands after it, the checkpoint reaches
    the good record, and every counter agrees."""
    stream = MemoryStream(1)
    after = good(0)
    _, sequence = stream.put(case.data, case.partition_key, explicit_hash_key=0)
    _, good_sequence = stream.put(after.data, after.partition_key, explicit_hash_key=0)
    metrics = LanderMetrics()
    archive_root = tmp_path / "archive"
    lander = Lander(_settings(mode), FileObjectStore(archive_root), "", metrics)
    await lander.initialize(InitializationInput(SHARD, "w1", Sentinel.TRIM_HORIZON))
    reader = ShardReader(stream, SHARD, Sentinel.TRIM_HORIZON, metrics=metrics)
    pages = reader.batches()
    records = (await anext(pages)).records
    await pages.aclose()

    checkpoints = Checkpoints()
    for page in (
        [r for r in records if r.position.sequence == sequence],
        [r for r in records if r.position.sequence == good_sequence],
    ):
        await lander.process_records(ProcessRecordsInput(page, checkpoints, 0))
    await lander.shutdown_requested(checkpoints)

    placed = [Placed(case, SHARD, sequence), Placed(after, SHARD, good_sequence)]
    _verify(placed, mode, Archive.read(_folder_objects(archive_root)))
    assert checkpoints.positions[-1] == Position(good_sequence, 0)
    expected = Expected.of(placed, mode)
    assert metrics.value("lander_records_read", shard_id=SHARD) == expected.user_records
    assert metrics.value("lander_records_landed", shard_id=SHARD) == expected.landed
    assert metrics.value("lander_dead_letters", shard_id=SHARD) == expected.dead


def test_invalid_utf8_reason_names_the_offending_byte() -> None:
    """A dead letter's reason should say where the payload stops being UTF-8."""
    data = b'{"a": "\xff\xfe"}'
    record = Record(SHARD, Position(1), "k", data, datetime(2026, 1, 1, tzinfo=UTC))
    encoded = Encoder("corpus").encode(record)
    assert isinstance(encoded, DeadLetter)
    assert encoded.reason.startswith("not UTF-8: ")  # not filed as invalid JSON (issue 46)
    assert "surrogate" not in encoded.reason
    assert "byte 7" in encoded.reason


# -- the whole corpus through the real Worker, in process ----------------------------

WORKER_FAST = {
    "failover_seconds": 2.0,
    "shard_sync_seconds": 0.2,
    "poll_idle_seconds": 0.2,
    "shutdown_seconds": 3.0,
    "flush_seconds": 0.3,
}


def _interleaved(put: Callable[[Case, int], tuple[str, int]], mode: Mode) -> list[Placed]:
    """Every case the code gets right under ``mode`` (one that stalls its shard would
    hold up the rest), each followed by a good record on the same shard, alternating
    between the two shards."""
    placed: list[Placed] = []
    runnable = [case for case in CASES if not case.broken(mode)]
    for number, case in enumerate(runnable):
        shard_index = number % 2
        for one in (case, good(number)):
            shard, sequence = put(one, shard_index)
            placed.append(Placed(one, shard, sequence))
    return placed


@pytest.mark.parametrize("mode", MODES)
async def test_whole_corpus_through_the_worker(mode: Mode, tmp_path: Path) -> None:
    """Two shards, every case between good records, one Worker: everything is landed
    or dead-lettered once, and the worker's counters say so."""
    stream = MemoryStream(2)
    placed = _interleaved(
        lambda case, shard: stream.put(
            case.data, case.partition_key, explicit_hash_key=0 if shard == 0 else MAX_HASH
        ),
        mode,
    )
    assert {one.shard for one in placed} == {SHARD, "shardId-000000000001"}
    expected = Expected.of(placed, mode)
    settings = _settings(mode, worker_id="w1", **WORKER_FAST)
    metrics = LanderMetrics()
    store = FileObjectStore(tmp_path / "archive")
    factory: Callable[[], RecordProcessor] = lambda: Lander(settings, store, "", metrics)  # noqa: E731
    worker = Worker(settings, MemoryLeaseStore(), stream, factory, metrics=metrics)
    task = asyncio.create_task(worker.run())

    def total(name: str) -> float:
        return sum(metrics.value(name, shard_id=shard) for shard in {p.shard for p in placed})

    try:
        # On a timeout, _verify below names what never arrived.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(20):
                while (
                    total("lander_records_landed") < expected.landed
                    or total("lander_dead_letters") < expected.dead
                ):
                    assert not task.done(), task
                    await asyncio.sleep(0.05)
    finally:
        worker.request_stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(task, 10)
    _verify(placed, mode, Archive.read(_folder_objects(tmp_path / "archive")))
    assert total("lander_records_read") == expected.user_records
    assert total("lander_records_landed") == expected.landed
    assert total("lander_dead_letters") == expected.dead


# -- the whole corpus on kinesalite, one `lander run` process, S3 on moto ------------


def _metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        body = reply.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def _metrics_port(cluster: Cluster, name: str) -> int | None:
    for line in cluster.log_text(name).splitlines():
        if "metrics and health endpoints listening" in line:
            return int(json.loads(line)["port"])
    assert cluster.procs[name].poll() is None, cluster.log_text(name)[-3000:]
    return None


@pytest.mark.emulator
@pytest.mark.processes
@pytest.mark.timeout(180)
def test_whole_corpus_on_kinesalite_with_a_worker_process(
    aws_env: dict[str, str], tmp_path: Path
) -> None:
    """The corpus (the 1 MiB record included) between good records on a 2-shard
    stream, one worker process landing into S3: every case and every good record is
    accounted for in the archive as the corpus says, and /metrics agrees."""
    cluster = Cluster(
        aws_env,
        tmp_path,
        2,
        extra_env={
            "LANDER_FLUSH_SECONDS": "1",
            "LANDER_PAYLOAD_FORMAT": "json",
            "LANDER_EVENT_ID_POINTER": POINTER,
            "LANDER_METRICS_PORT": "0",
        },
    )
    cluster.with_archive()
    hash_keys = ("0", str(2**128 - 1))

    def put(case: Case, shard: int) -> tuple[str, int]:
        out = cluster.kinesis.put_record(
            StreamName=cluster.stream,
            Data=case.data,
            PartitionKey=case.partition_key,
            ExplicitHashKey=hash_keys[shard],
        )
        return out["ShardId"], int(out["SequenceNumber"])

    started = time.monotonic()
    placed = _interleaved(put, "json")
    assert len({one.shard for one in placed}) == 2
    expected = Expected.of(placed, "json")
    bodies: dict[str, bytes] = {}

    def objects() -> Iterator[tuple[str, bytes]]:
        for key in cluster.archive_keys():
            if key not in bodies:
                bodies[key] = cluster.s3.get_object(Bucket=cluster.bucket, Key=key)["Body"].read()
            yield key, bodies[key]

    try:
        cluster.start("corpus")
        port = wait_until(lambda: _metrics_port(cluster, "corpus"), 30, "the metrics port")

        def accounted() -> Archive | None:
            archive = Archive.read(objects())
            return archive if len(archive) >= expected.user_records else None

        try:
            archive = wait_until(accounted, 60, "every case and good record archived", step=0.5)
        except AssertionError:
            _verify(placed, "json", Archive.read(objects()))  # names what is missing
            raise
        _verify(placed, "json", archive)

        def counted() -> dict[str, float] | None:
            totals = _metrics(port)
            landed = totals.get("lander_records_landed_total", 0)
            dead = totals.get("lander_dead_letters_total", 0)
            return totals if (landed, dead) == (expected.landed, expected.dead) else None

        totals = wait_until(counted, 10, "/metrics to count every landed and dead record")
        assert totals["lander_records_read_total"] == expected.user_records
        print(
            f"{len(placed)} records, {expected.user_records} user records: "
            f"{expected.landed} landed, {expected.dead} dead letters "
            f"in {time.monotonic() - started:.1f} s"
        )
    finally:
        codes = cluster.stop_all()
    assert codes == {"corpus": 0}, cluster.log_text("corpus")[-3000:]
    assert "shard failed" not in cluster.log_text("corpus")
