"""The Spark jobs: a nightly compaction of the landed archive into deduplicated
Parquet, and an analysis with a report a person can read.

May import, of the daemon's package, only the archive format (consumer.archive),
settings and errors (consumer.config, consumer.errors), sequences and logging.
"""
