"""The analysis of a compacted window: tables and a report a person can read.

``analyse.py`` computes the findings (``findings.py``, pure) with Spark; ``report.py``
and ``charts.py`` render them.

May import the shared modules at sparkjobs/'s root, :mod:`sparkjobs.table` (it reads
what is published) and, of :mod:`sparkjobs.compaction`, only ``lines.py`` (a JSON
pointer read as the dedupe reads it); never the compaction's runner.
"""
