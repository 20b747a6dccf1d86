"""The Spark jobs: a nightly compaction of the landed archive into deduplicated
Parquet, and an analysis with a report a person can read.

By concern: :mod:`sparkjobs.compaction` (the compaction), :mod:`sparkjobs.table` (the
compacted table and what it records: publishing, manifests, maintenance, the raw
table) and :mod:`sparkjobs.analysis` (the analysis and its report). At the root, only
what every job shares: the command line (``cli.py``, ``helptext.py``), settings
(``settings.py``), the Spark session (``session.py``), filesystems (``io.py``), windows
and hour labels (``window.py``) and which catalog and table (``catalog.py``).
``tests/test_layout.py`` holds the subpackages' import rules.

May import, of the daemon's package, only the archive format (consumer.archive),
settings and errors (consumer.config, consumer.errors), sequences and logging.
"""
