"""The help texts of the batch commands: ``lander compact``, ``analyse``, ``maintain``,
``migrate-pointers``, ``raw-table``."""

from consumer.archive.codec import GLOB

EXIT_CODES = """\
exit status: 0 done or already up to date, 1 failed, 2 bad settings or no PySpark,
3 nothing to do: the window has no input (0 with --allow-empty), 4 (compact) done, but
some input could not be read: reported, counted and left out (0 with
--allow-bad-input); with several windows the worst of theirs, in the order 1, 4, 3, 0
"""

COMPACT_HELP = (
    """\
Compact windows of the landed archive into deduplicated Parquet.

Reads {archive}/stream=S/dt=D/hour=H/**/"""
    + GLOB
    + """ for a day or an hour (and the dedupe
horizon before it), drops transport duplicates (same position) and producer duplicates
(same event id within the horizon), keeps each payload byte for byte, writes Parquet,
and publishes it by one commit to the Iceberg table --table (default lander.S) in the
pyiceberg catalog --catalog (default lander: as configured, else an embedded SQLite
catalog in {compacted}/catalog.db). Re-running a window rewrites only hours whose input
changed (late files). Bad input is counted and reported with its file, the readable
rest published, and the window exits 4 (--allow-bad-input: 0); --strict fails the
window instead (exit 1), publishing nothing. With --pushgateway (LANDER_PUSHGATEWAY)
each stream's counts, exit code and finish time are pushed at the end of the run.

Several streams (--stream a,b) and windows (--window 2026-11-01..2026-11-07, or a
comma list) run one after another in one Spark session, each published on its own
with its own result line; a failed or empty window does not stop the others.

A window whose hours hold no landed object at all (a quiet stream, or a wrong
--archive) is reported in one line and exits 3 without starting Spark for a local
archive; --allow-empty makes that exit 0.

"""
)

ANALYSE_HELP = """\
Analyse a compacted window: volume per minute and shard, duplicates by cause,
lateness, hot partition keys, producer sequence gaps, dead letters. Writes Parquet
tables and a self-contained report.html under {reports}/stream=S/{window}/.

Several streams (--stream a,b) and windows (--window A..B, or a comma list) are
analysed one after another in one Spark session.

A window with no compacted data (never compacted, or compacted empty) is reported in
one line and exits 3, writing nothing; --allow-empty makes that exit 0.

"""

MAINTAIN_HELP = """\
Maintain the compacted tables: expire snapshots older than --snapshot-retention (the
current one never), then delete the files under the table's data/ and metadata/ that
no remaining snapshot references and that are older than --orphan-age (the files of
replaced hours, of runs that crashed before their commit, Spark's .crc and _SUCCESS),
and the run manifests no published hour names. No Spark. Run it after the nightly
compaction.

"""

TABLE_EXIT_CODES = """\
exit status: 0 done, 1 failed (any table), 2 bad settings, 3 (maintain) a table does not
exist: run lander compact first; with several tables the worst of theirs
"""

MIGRATE_HELP = """\
Import an output published by pointer files (the format before the Iceberg table) into
the stream's table: for each hour the pointer with the latest listing, its files
registered where they are, its input digest recorded, so the next compaction of an
imported day finds it up to date. Runs once per stream; running it again imports
nothing new. Delete _published/ and the _runs/ folders no pointer names once the table
reads right.

"""

RAW_TABLE_HELP = """\
Register the landed archive of each stream as an external table in the AWS Glue Data
Catalog ({stream}_raw in the database lander), so Athena queries the last minutes
before compaction: the lander's own field list as columns, gzipped JSON Lines through
the OpenX JSON SerDe, partition projection on dt, hour and minute (no partitions to
add, ever). Creates the table, or updates it in place when it exists. The Glue client
is boto3's: region, credentials and AWS_ENDPOINT_URL_GLUE as boto3 finds them.

"""
