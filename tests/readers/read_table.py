"""Read a compacted table the way a user of another engine would: no project code.

Run by tests/sparkjobs/test_table_readers.py in ``.venv-readers`` (duckdb 1.5.5 with its
iceberg extension from PyPI, pyiceberg), which has neither ``sparkjobs`` nor
``consumer``. Prints one JSON object: the rows each reader returned, the metadata file
DuckDB read, and the row count of a one-hour ``arrival_ts`` filter.

Usage: ``python read_table.py CATALOG_DB WAREHOUSE_URI TABLE HOUR_START``
"""

from __future__ import annotations

import json
import sys

import duckdb
from duckdb_extensions import import_extension
from pyiceberg.catalog.sql import SqlCatalog

COLUMNS = ("shard_id", "sequence_number", "subsequence_number", "event_id")


def main(catalog_db: str, warehouse: str, identifier: str, hour: str) -> None:
    catalog = SqlCatalog("lander", uri=f"sqlite:///{catalog_db}", warehouse=warehouse)
    table = catalog.load_table(identifier)
    scanned = table.scan(selected_fields=COLUMNS).to_arrow().to_pylist()

    connection = duckdb.connect()
    for name in ("avro", "iceberg"):
        import_extension(name, con=connection)
    connection.execute("LOAD iceberg")
    source = f"iceberg_scan('{table.metadata_location}')"
    rows = connection.execute(f"SELECT {', '.join(COLUMNS)} FROM {source}").fetchall()
    # The typed payload columns, without a JSON function (files written by typed runs
    # carry no field ids: both readers map their columns by the table's name mapping).
    typed = connection.execute(
        f"SELECT count(payload.seq), count(*) FILTER (WHERE payload.seq IS DISTINCT FROM "
        f"TRY_CAST(json_extract(data, '$.seq') AS BIGINT)), any_value(typeof(payload.seq)) "
        f"FROM {source}"
    ).fetchone()
    # The event time (LANDER_EVENT_TIME_POINTER=/ts), a column the table is also
    # partitioned by (day(event_ts)): equal to the JSON's, and a day's filter prunes.
    event = connection.execute(
        f"SELECT count(event_ts), count(*) FILTER (WHERE event_ts IS DISTINCT FROM "
        f"TRY_CAST(json_extract_string(data, '$.ts') AS TIMESTAMPTZ)), "
        f"count(*) FILTER (WHERE event_ts >= ?::TIMESTAMPTZ::DATE::TIMESTAMPTZ "
        f"AND event_ts < ?::TIMESTAMPTZ::DATE::TIMESTAMPTZ + INTERVAL 1 DAY) FROM {source}",
        [hour, hour],
    ).fetchone()
    by_pyiceberg = table.scan(selected_fields=("payload", "data")).to_arrow().to_pylist()
    differ = sum(1 for r in by_pyiceberg if (r["payload"] or {}).get("seq") != _seq(r["data"]))
    in_hour = connection.execute(
        f"SELECT count(*) FROM {source} WHERE arrival_ts >= ?::TIMESTAMPTZ "
        "AND arrival_ts < ?::TIMESTAMPTZ + INTERVAL 1 HOUR",
        [hour, hour],
    ).fetchone()
    print(
        json.dumps(
            {
                "metadata": table.metadata_location,
                "pyiceberg": [[r[c] for c in COLUMNS] for r in scanned],
                "duckdb": [list(r) for r in rows],
                "duckdb_hour_rows": in_hour[0] if in_hour else None,
                "duckdb_typed": list(typed) if typed else None,
                "duckdb_event": list(event) if event else None,
                "partition": [f.name for f in table.spec().fields],
                "pyiceberg_typed": [
                    sum(1 for r in by_pyiceberg if (r["payload"] or {}).get("seq") is not None),
                    differ,
                ],
            }
        )
    )


def _seq(data: str | None) -> int | None:
    """The payload's seq as JSON says it (None when the payload has none)."""
    value = json.loads(data) if data else None
    seq = value.get("seq") if isinstance(value, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


if __name__ == "__main__":
    main(*sys.argv[1:5])
