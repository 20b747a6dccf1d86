"""The analysis of a compacted window: tables and a report a person can read.

``analyse.py`` computes the findings (``findings.py``, pure) with Spark; ``report.py``
renders them as a text summary and, through ``page.py`` (the HTML page) and
``sections.py`` (its sections), with ``charts.py``'s inline SVG, as one page;
``formats.py`` writes numbers and times for both.

May import the shared modules at sparkjobs/'s root, :mod:`sparkjobs.table` (it reads
what is published) and, of :mod:`sparkjobs.compaction`, only ``lines.py`` (a JSON
pointer read as the dedupe reads it); never the compaction's runner.
"""
