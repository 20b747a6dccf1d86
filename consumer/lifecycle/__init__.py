"""A shard's life under a lease, and the worker that runs them.

    processor.py       the five-call contract users implement (imports only records
                       and sequences at run time)
    shard_consumer.py  one shard under one lease: the lease-fenced checkpointer,
                       progress, lease loss
    worker.py          the supervisor: lease, renew and shard-sync loops, landing
                       health, graceful shutdown
    assembly.py        the daemon built from its settings (``lander run``, ``status``):
                       streams or lanes (fleet.py), stores, read modes, start-up checks
                       (preflight.py), the worker and its health server (health.py)

May import the reading side, the leases and the shared pieces; never the operator
layer (consumer.cli) or the Spark jobs.
"""
