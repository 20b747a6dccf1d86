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
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
