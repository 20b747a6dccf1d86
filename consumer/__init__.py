"""kinesis-lander's daemon library: consume a Kinesis stream through fenced DynamoDB
leases and land it in an archive exactly once.

    archive/    the archive format (key layout, landed line, reader); stdlib only
    leases/     lease model, pure decisions, stores, coordinator, worker identity
    stream/     the reading side: stream interface and backends, records, KPL,
                one shard's reader, shard discovery
    lifecycle/  the processor contract, one shard's life under a lease, the worker,
                its start-up checks and its health server
    landing/    the built-in processor that writes the archive
    aws, config, errors, sequence, metrics, telemetry: pieces every layer shares;
                compiled: which hot-path modules a wheel compiles with mypyc
    cli/        the operator layer: the ``lander`` command, demo, load generator,
                status, local stack; the only part that may import sparkjobs

Nothing here outside ``cli/`` imports ``cli/``, ``sparkjobs``, ``bench`` or ``tests``
(tests/test_layout.py checks the rules).
"""
