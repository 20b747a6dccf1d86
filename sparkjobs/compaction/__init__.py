"""The compaction: one window of the landed archive into the stream's Iceberg table.

``compact.py`` runs it: ``plan.py`` decides from listings without Spark, ``sparkplan.py``
reads, dedupes (``dedupe.py``'s rule, ``sparkkeys.py``) and writes, ``lines.py`` and
``objectreader.py`` (with the Java function in ``jvm/``) read the landed lines,
``damage.py`` tells a damaged input's failure from any other, ``fallback.py`` checks
damaged input, ``quiet.py`` keeps Spark's loggers from printing the failure the job
handles, ``counters.py`` counts rows by cause, ``runmetrics.py`` pushes a run's counts
and exit code to a Prometheus Pushgateway.

May import the shared modules at sparkjobs/'s root and :mod:`sparkjobs.table` (a run
publishes to the table and records its manifest there); never :mod:`sparkjobs.analysis`.
"""
