"""The compacted output as a table: the Iceberg table and what it records.

``table.py`` the table, one commit per run; ``columns.py`` and ``schema.py`` its columns;
``publish.py`` what each hour was made from, which hours are stale (pure);
``manifest.py`` the run manifests beside the table; ``compacted.py`` reads what is
published; ``maintain.py`` expiry and orphans; ``migrate.py`` imports pointer-published
outputs; ``rawtable.py`` the raw landing as a Glue/Athena table.

May import the shared modules at sparkjobs/'s root only: neither
:mod:`sparkjobs.compaction` nor :mod:`sparkjobs.analysis`, which both use it.
"""
