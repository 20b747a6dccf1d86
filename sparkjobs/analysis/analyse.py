"""What happened in a stream during a window, from its compacted rows and manifests.

Tables (Parquet, under ``{reports}/stream={stream}/{window}/tables/``):

- ``volume``: records and payload bytes per arrival minute and shard (the report's
  chart in buckets the span of the data chooses: seconds for a minute of it);
- ``duplicates``: per hour, what compaction removed by cause (from its manifests);
- ``lateness``: percentiles of landed minus arrival, and of arrival minus the payload's
  event time when ``event_time_pointer`` is set;
- ``shards`` and ``hot_keys``: how records spread over shards and partition keys;
- ``gaps``: per producer (partition key), gaps in a sequence field and reorders within
  a shard, when ``sequence_pointer`` is set;
- ``dead_letters``: the window's dead letters by reason, when the archive is given.

The same findings become ``report.html`` (:mod:`sparkjobs.analysis.report`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as sf

from consumer.archive.codec import GLOB
from consumer.archive.layout import DEAD_LETTER, hour_folder, parse_relative, stream_folder
from sparkjobs.analysis.charts import bucket_seconds
from sparkjobs.analysis.findings import (
    Analysis,
    BadInput,
    DeadLetterStat,
    DuplicateStat,
    HotKey,
    Lateness,
    RescuedStat,
    SequenceGaps,
    ShardShare,
    VolumePoint,
)
from sparkjobs.analysis.report import render_html
from sparkjobs.catalog import TableRef, table_ref
from sparkjobs.compaction.lines import event_time, json_path
from sparkjobs.io import Filesystem, filesystem_for, join
from sparkjobs.table import compacted
from sparkjobs.table.columns import RESCUED
from sparkjobs.table.manifest import manifest_uri
from sparkjobs.table.table import EVENT_TS
from sparkjobs.window import Window, parse_hour

log = structlog.get_logger("sparkjobs.analyse")

PERCENTILES = (0.5, 0.9, 0.99)
MAX_GAP_ROWS = 500


@dataclass(frozen=True, slots=True)
class AnalyseJob:
    """One analysis: which stream and window, where its compaction and archive are."""

    compacted: str
    stream: str
    window: Window
    reports: str
    archive: str | None = None
    event_time_pointer: str | None = None
    sequence_pointer: str | None = None
    top_keys: int = 20
    payload_format: str = "json"
    """``raw``: ``data`` is base64, and volume counts the bytes it decodes to."""
    catalog: str = "lander"
    table: str = "lander.{stream}"

    @property
    def ref(self) -> TableRef:
        """The compacted table (``LANDER_CATALOG``, ``LANDER_TABLE``)."""
        return table_ref(self.compacted, self.stream, self.catalog, self.table)

    @property
    def folder(self) -> str:
        """Where this window's report and tables go."""
        return join(self.reports, stream_folder(self.stream), self.window.label)


def payload_bytes(data: Column, payload_format: str) -> Column:
    """A payload's size in bytes: the UTF-8 bytes of its JSON text, or in raw format the
    bytes its base64 decodes to (not characters: ``é`` is two bytes, ``€`` three)."""
    if payload_format == "raw":
        return sf.octet_length(sf.try_to_binary(data, sf.lit("base64")))
    return sf.octet_length(data)


def _base(frame: DataFrame, job: AnalyseJob, stored_event_time: bool = False) -> DataFrame:
    """The columns every table needs, without the payload, cached once.

    ``stored_event_time``: the compaction wrote ``event_ts`` by the same pointer; it is
    read instead of the payload wherever set (files before it read null there)."""
    columns: list[Column | str] = [
        sf.date_trunc("minute", "arrival_ts").alias("minute"),
        sf.date_trunc("hour", "arrival_ts").alias("hour"),
        "shard_id",
        "partition_key",
        "sequence_number",
        "subsequence_number",
        "event_id",
        "arrival_ts",
        ((sf.unix_micros("landed_ts") - sf.unix_micros("arrival_ts")) / 1000).alias("landing_ms"),
        sf.coalesce(payload_bytes(sf.col("data"), job.payload_format), sf.lit(0)).alias("bytes"),
    ]
    if job.event_time_pointer:
        at = event_time(sf.col("data"), job.event_time_pointer)
        if stored_event_time:
            at = sf.coalesce(sf.col(EVENT_TS), at)
        columns.append(
            ((sf.unix_micros("arrival_ts") - sf.unix_micros(at)) / 1000).alias("event_ms")
        )
    if job.sequence_pointer:
        raw = sf.get_json_object("data", json_path(job.sequence_pointer))
        columns.append(raw.try_cast("long").alias("producer_seq"))
    return frame.select(*columns).cache()


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _volume(base: DataFrame) -> tuple[DataFrame, list[VolumePoint], int]:
    """The table (per minute and shard), and the chart's points in buckets the span of
    the data chooses (:func:`bucket_seconds`) and their width in seconds: a minute of
    data is sixty points, not one drawn flat across the chart."""
    sums = (sf.count(sf.lit(1)).alias("records"), sf.sum("bytes").alias("bytes"))
    table = base.groupBy("minute", "shard_id").agg(*sums)
    extent = base.agg(
        (sf.unix_micros(sf.max("arrival_ts")) - sf.unix_micros(sf.min("arrival_ts"))).alias("us")
    ).first()
    seconds = bucket_seconds(((extent and extent["us"]) or 0) / 1e6)
    second = sf.unix_seconds("arrival_ts")
    start = sf.timestamp_seconds(second - sf.pmod(second, sf.lit(seconds))).alias("start")
    rows = base.groupBy(start, "shard_id").agg(*sums).orderBy("start", "shard_id").collect()
    points = [
        VolumePoint(_utc(r["start"]), r["shard_id"], int(r["records"]), int(r["bytes"] or 0))
        for r in rows
    ]
    return table, points, seconds


def _lateness(base: DataFrame, column: str, kind: str) -> tuple[DataFrame, list[Lateness]]:
    """Percentiles per hour and (hour null) over the whole window."""
    stats = [
        sf.count(column).alias("samples"),
        sf.percentile_approx(column, list(PERCENTILES), 10_000).alias("p"),
        sf.max(column).alias("max_ms"),
    ]
    per_hour = base.groupBy("hour").agg(*stats)
    whole = base.agg(*stats).select(sf.lit(None).cast("timestamp").alias("hour"), "*")
    table = whole.unionByName(per_hour).select(
        sf.lit(kind).alias("kind"),
        "hour",
        "samples",
        sf.col("p")[0].alias("p50_ms"),
        sf.col("p")[1].alias("p90_ms"),
        sf.col("p")[2].alias("p99_ms"),
        "max_ms",
    )
    found = [
        Lateness(
            kind,
            _utc(r["hour"]) if r["hour"] is not None else None,
            int(r["samples"]),
            float(r["p50_ms"] or 0),
            float(r["p90_ms"] or 0),
            float(r["p99_ms"] or 0),
            float(r["max_ms"] or 0),
        )
        for r in table.orderBy(sf.col("hour").asc_nulls_first()).collect()
        if r["samples"]
    ]
    return table, found


def _shards(
    base: DataFrame, total: int, top: int
) -> tuple[DataFrame, DataFrame, list[ShardShare], list[HotKey]]:
    shards = base.groupBy("shard_id").agg(sf.count(sf.lit(1)).alias("records"))
    per_shard = {r["shard_id"]: int(r["records"]) for r in shards.collect()}
    shares = [
        ShardShare(shard, n, n / total if total else 0.0) for shard, n in sorted(per_shard.items())
    ]
    keys = base.groupBy("partition_key", "shard_id").agg(sf.count(sf.lit(1)).alias("records"))
    hot = [
        HotKey(
            str(r["partition_key"]),
            r["shard_id"],
            int(r["records"]),
            int(r["records"]) / per_shard[r["shard_id"]],
            int(r["records"]) / total,
        )
        for r in keys.orderBy(sf.desc("records"), "partition_key").limit(top).collect()
    ]
    return shards, keys, shares, hot


def _gaps(base: DataFrame) -> tuple[DataFrame, list[SequenceGaps]]:
    """Per producer: distinct values missing between first and last, and reorders.

    A reorder is a record whose value is below the one before it in its shard. Kinesis
    keeps one order per shard, its sequence numbers' (as numbers; aggregated records by
    subsequence). Arrival times are approximate (equal within a millisecond, at times
    earlier for a later record), and across shards there is no order: ordered by them,
    one key's records split over shards (a KPL aggregate routed by another key, a
    reshard) counted reorders Kinesis never made.
    """
    seqs = base.filter(sf.col("producer_seq").isNotNull())
    in_shard = SparkWindow.partitionBy("partition_key", "shard_id").orderBy(
        sf.length("sequence_number"), "sequence_number", "subsequence_number"
    )
    ordered = seqs.select(
        "partition_key",
        "producer_seq",
        (sf.col("producer_seq") < sf.lag("producer_seq").over(in_shard)).alias("reorder"),
    )
    distinct = ordered.select("partition_key", "producer_seq").distinct()
    by_value = SparkWindow.partitionBy("partition_key").orderBy("producer_seq")
    breaks = distinct.select(
        "partition_key",
        (sf.col("producer_seq") - sf.lag("producer_seq").over(by_value) > 1).alias("gap"),
    )
    gaps = breaks.groupBy("partition_key").agg(sf.count(sf.when(sf.col("gap"), 1)).alias("gaps"))
    table = (
        ordered.groupBy("partition_key")
        .agg(
            sf.count(sf.lit(1)).alias("records"),
            sf.min("producer_seq").alias("first"),
            sf.max("producer_seq").alias("last"),
            sf.count_distinct("producer_seq").alias("distinct"),
            sf.count(sf.when(sf.col("reorder"), 1)).alias("reorders"),
        )
        .join(gaps, "partition_key")
        .select(
            sf.col("partition_key").alias("producer"),
            "records",
            "first",
            "last",
            "gaps",
            (sf.col("last") - sf.col("first") + 1 - sf.col("distinct")).alias("missing"),
            "reorders",
        )
    )
    rows = (
        table.filter((sf.col("missing") > 0) | (sf.col("reorders") > 0))
        .orderBy(sf.desc("missing"), sf.desc("reorders"), "producer")
        .limit(MAX_GAP_ROWS)
        .collect()
    )
    found = [
        SequenceGaps(
            str(r["producer"]),
            int(r["records"]),
            int(r["first"]),
            int(r["last"]),
            int(r["gaps"]),
            int(r["missing"]),
            int(r["reorders"]),
        )
        for r in rows
    ]
    return table, found


def _remaining_duplicates(base: DataFrame) -> int:
    """Rows sharing an event id or a position with another row: zero after compaction."""
    by_event = (
        base.filter(sf.col("event_id").isNotNull())
        .groupBy("event_id")
        .count()
        .filter("count > 1")
        .agg(sf.sum(sf.col("count") - 1))
        .first()
    )
    by_position = (
        base.groupBy("shard_id", "sequence_number", "subsequence_number")
        .count()
        .filter("count > 1")
        .agg(sf.sum(sf.col("count") - 1))
        .first()
    )
    return int((by_event and by_event[0]) or 0) + int((by_position and by_position[0]) or 0)


def _manifest_findings(
    fs: Filesystem, job: AnalyseJob
) -> tuple[list[DuplicateStat], list[BadInput]]:
    """Duplicates and bad input of each hour, from the manifest of the run that made it."""
    manifests: dict[str, dict[str, Any]] = {}
    duplicates: list[DuplicateStat] = []
    bad: list[BadInput] = []
    for hour, run_id in sorted(compacted.hour_runs(job.ref, fs, job.window).items()):
        if run_id not in manifests:
            data = fs.read(manifest_uri(job.compacted, job.stream, run_id))
            manifests[run_id] = json.loads(data) if data else {}
        manifest = manifests[run_id]
        for stats in manifest.get("hours", []):
            if stats["hour"] == hour:
                duplicates.append(
                    DuplicateStat(
                        parse_hour(hour),
                        int(stats["input_rows"]),
                        int(stats["transport"]),
                        int(stats["producer"]),
                        int(stats["output_rows"]),
                        int(stats.get("sequence", 0)),  # manifests before sequence dedupe
                    )
                )
        for item in manifest.get("bad_files", []):
            where = parse_relative(item["file"])
            if where is not None and where.hour == parse_hour(hour):
                bad.append(BadInput(item["file"], item["kind"], int(item["lines"]), item["detail"]))
    return duplicates, bad


def _rescued(frame: DataFrame) -> tuple[DataFrame, list[RescuedStat]]:
    """The window's rescued payload values by place (files before typed columns: none)."""
    table = (
        frame.filter(sf.col(RESCUED).isNotNull())
        .select(sf.explode(sf.json_object_keys(RESCUED)).alias("place"))
        .groupBy("place")
        .agg(sf.count(sf.lit(1)).alias("values"))
    )
    rows = table.orderBy(sf.desc("values"), "place").collect()
    return table, [RescuedStat(r["place"], int(r["values"])) for r in rows]


def _dead_letters(
    spark: SparkSession, job: AnalyseJob
) -> tuple[DataFrame | None, list[DeadLetterStat]]:
    """The window's dead letters by reason (the text before any ':' detail)."""
    if job.archive is None:
        return None, []
    fs = filesystem_for(job.archive, spark)
    base = join(job.archive, DEAD_LETTER, stream_folder(job.stream))
    folders = [join(base, hour_folder(h)) for h in job.window.hour_starts()]
    present = [f for f in folders if fs.list_files(f)]
    if not present:
        return None, []
    letters = (
        spark.read.schema("reason string")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", GLOB)
        .json(present)
    )
    table = letters.groupBy(sf.regexp_extract("reason", "^[^:]*", 0).alias("reason")).agg(
        sf.count(sf.lit(1)).alias("records")
    )
    rows = table.orderBy(sf.desc("records"), "reason").collect()
    return table, [DeadLetterStat(r["reason"], int(r["records"])) for r in rows]


def analyse(spark: SparkSession, job: AnalyseJob, now: datetime | None = None) -> Analysis:
    """Run the analysis, write its tables and report, and return what it found."""
    fs = filesystem_for(job.compacted, spark)
    frame = compacted.read(spark, job.ref, job.window)
    stored = job.event_time_pointer is not None
    base = _base(frame, job, stored and compacted.event_pointer(job.ref) == job.event_time_pointer)
    try:
        totals = base.agg(sf.count(sf.lit(1)).alias("n"), sf.sum("bytes").alias("b")).first()
        records = int(totals["n"]) if totals else 0
        payload = int((totals["b"] if totals else 0) or 0)
        tables: dict[str, DataFrame] = {}
        tables["volume"], volume, volume_seconds = _volume(base)
        tables["lateness"], lateness = _lateness(base, "landing_ms", "landing")
        if job.event_time_pointer:
            event_table, event = _lateness(base, "event_ms", "event")
            tables["lateness"] = tables["lateness"].unionByName(event_table)
            lateness += event
        tables["shards"], tables["hot_keys"], shards, hot = _shards(base, records, job.top_keys)
        gaps: list[SequenceGaps] = []
        if job.sequence_pointer:
            tables["gaps"], gaps = _gaps(base)
        remaining = _remaining_duplicates(base)
        duplicates, bad = _manifest_findings(fs, job)
        letters_table, letters = _dead_letters(spark, job)
        if letters_table is not None:
            tables["dead_letters"] = letters_table
        tables["rescued"], rescued = _rescued(frame)
        if duplicates:
            tables["duplicates"] = spark.createDataFrame([asdict(d) for d in duplicates])
        for name, table in tables.items():
            table.coalesce(1).write.mode("overwrite").parquet(join(job.folder, "tables", name))
    finally:
        base.unpersist()
    analysis = Analysis(
        stream=job.stream,
        window=job.window.label,
        generated_at=now or datetime.now(UTC),
        records=records,
        bytes=payload,
        volume=volume,
        volume_seconds=volume_seconds,
        duplicates=duplicates,
        remaining_duplicates=remaining,
        lateness=lateness,
        shards=shards,
        hot_keys=hot,
        sequence_field=job.sequence_pointer,
        gaps=gaps,
        event_time_field=job.event_time_pointer,
        bad_inputs=bad,
        dead_letters=letters,
        rescued=rescued,
        tables=join(job.folder, "tables"),
    )
    out = filesystem_for(job.reports, spark)
    out.write_atomic(join(job.folder, "report.html"), render_html(analysis).encode())
    log.info(
        "analysed",
        stream=job.stream,
        window=job.window.label,
        records=records,
        remaining_duplicates=remaining,
        report=join(job.folder, "report.html"),
    )
    return analysis
