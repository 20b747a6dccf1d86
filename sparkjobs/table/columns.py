"""A compacted row's columns: the one list the table's two schemas are made from.

Pure (no pyspark, no pyiceberg): the Iceberg schema (:mod:`sparkjobs.table.table`) is
made without pyspark, the Spark schema (:mod:`sparkjobs.table.schema`) without pyiceberg.
"""

from __future__ import annotations

COMPACTED_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("stream", "string", False),
    ("shard_id", "string", False),
    ("sequence_number", "string", False),
    ("subsequence_number", "long", False),
    ("partition_key", "string", True),
    ("arrival_ts", "timestamp", False),
    ("landed_ts", "timestamp", True),
    ("event_id", "string", True),
    ("data", "string", True),
)
"""A compacted row's columns in order: name, kind, and whether Spark may leave it null.
Spark's schema (:data:`sparkjobs.table.schema.COMPACTED`) and the Iceberg table's
(:func:`sparkjobs.table.table.iceberg_schema`, field ids 1.. in this order) both come from here."""


PAYLOAD, RESCUED = "payload", "rescued"
"""The typed columns after these (issue 48): the payload's fields as one struct, and the
values that fit none of them, as JSON by pointer (:mod:`sparkjobs.compaction.typed`)."""
