"""The raw landing as a Glue/Athena table: the last minutes queryable before compaction.

``lander raw-table`` registers (or updates) an external table over the workers' archive,
``{stream}_raw`` in the Glue database ``lander`` by default. Its definition comes from
the archive's own field list (:data:`consumer.archive.envelope.FIELDS`), the one the
lander writes, so the two cannot drift:

- one column per landed field: ``string`` and ``integer`` (``bigint``) as landed,
  ``arrival_ts`` as its ISO-8601 text (``from_iso8601_timestamp(arrival_ts)`` in
  Athena), ``data`` as a string: the OpenX JSON SerDe gives a JSON object or array
  payload as its JSON text and a JSON string payload as the string's value (the
  compacted table keeps every payload's exact text; docs/sparkjobs.md);
- gzipped JSON Lines read with the OpenX SerDe, a malformed line skipped rather than
  failing the query (the compaction reports damaged objects);
- **partition projection** on ``dt`` (dates, the last ``LANDER_RAW_DAYS`` days up to
  now), ``hour`` and ``minute``: Athena computes the partitions from the query's filter
  and never lists or registers them. ``shard`` is not a projected partition: an
  ``injected`` one would make every query name a shard, an ``enum`` one would go stale,
  silently, at the next reshard. Each minute folder's shard folders are read whole
  (Athena reads every file under a partition's location), and ``shard_id`` is a column.

Pure but for :func:`register` and :func:`register_all`, which make the Glue calls.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import boto3

from consumer.archive.codec import COMPRESSION
from consumer.archive.envelope import FIELDS
from consumer.archive.layout import PARTITIONS, stream_folder
from sparkjobs.catalog import for_each, registered, table_name
from sparkjobs.io import join

if TYPE_CHECKING:
    from sparkjobs.settings import RawTableSettings

SERDE = "org.openx.data.jsonserde.JsonSerDe"
_TYPES = {"string": "string", "integer": "bigint", "json": "string"}


def table_input(name: str, stream: str, archive: str, days: int) -> dict[str, Any]:
    """Glue's ``TableInput`` for the raw table of ``stream`` landed under ``archive``."""
    location = registered(join(archive, stream_folder(stream))) + "/"
    template = location + "".join(f"{part}=${{{part}}}/" for part in PARTITIONS)
    return {
        "Name": name,
        "Description": f"Landed records of the Kinesis stream {stream} (kinesis-lander), "
        "before compaction: gzipped JSON Lines, one record a line.",
        "TableType": "EXTERNAL_TABLE",
        "PartitionKeys": [{"Name": key, "Type": "string"} for key in PARTITIONS],
        "StorageDescriptor": {
            "Columns": [
                {"Name": f.name, "Type": _TYPES[f.kind], "Comment": f.doc[:255]} for f in FIELDS
            ],
            "Location": location,
            "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
            "OutputFormat": "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
            "Compressed": True,
            "SerdeInfo": {
                "SerializationLibrary": SERDE,
                "Parameters": {"ignore.malformed.json": "true", "case.insensitive": "false"},
            },
        },
        "Parameters": {
            "EXTERNAL": "TRUE",
            "classification": "json",
            "compressionType": COMPRESSION,
            "projection.enabled": "true",
            "projection.dt.type": "date",
            "projection.dt.format": "yyyy-MM-dd",
            "projection.dt.range": f"NOW-{days}DAYS,NOW",
            "projection.dt.interval": "1",
            "projection.dt.interval.unit": "DAYS",
            "projection.hour.type": "integer",
            "projection.hour.range": "0,23",
            "projection.hour.digits": "2",
            "projection.minute.type": "integer",
            "projection.minute.range": "0,59",
            "projection.minute.digits": "2",
            "storage.location.template": template,
            "lander.stream": stream,
        },
    }


def register(glue: Any, database: str, table: dict[str, Any]) -> str:
    """Create the database if missing, then create the table or update it in place.
    Returns ``created`` or ``updated``."""
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):
        glue.create_database(DatabaseInput={"Name": database})
    try:
        glue.create_table(DatabaseName=database, TableInput=table)
    except glue.exceptions.AlreadyExistsException:
        glue.update_table(DatabaseName=database, TableInput=table)
        return "updated"
    return "created"


def register_all(settings: RawTableSettings) -> list[int]:
    """``lander raw-table``: each stream's raw table in turn, one line each; the exit code
    of each."""
    glue = boto3.client("glue")  # region, credentials, AWS_ENDPOINT_URL_GLUE as boto3 finds them
    names = [(table_name(settings.raw_table, stream), stream) for stream in settings.streams]

    def one(named: tuple[str, str]) -> str:
        name, stream = named
        archive = settings.for_stream(stream).archive_uri  # LANDER_STREAMS_FILE may move it
        table = table_input(name, stream, archive, settings.raw_days)
        outcome = register(glue, settings.raw_database, table)
        return (
            f"{outcome}; {table['StorageDescriptor']['Location']}, partitions projected "
            f"over dt (the last {settings.raw_days} days), hour, minute"
        )

    return for_each([(f"{settings.raw_database}.{n}", (n, s)) for n, s in names], "raw-table", one)
