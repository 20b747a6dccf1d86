"""Leases: which worker processes which shard, decided through conditional writes.

The lease model and pure decisions, the store interface with its DynamoDB and
in-memory backends, the coordinator that carries out the decisions for one worker,
and the worker-id claim. May import consumer.aws, errors and sequence only.

Nothing is imported here: the lease keys and model (:mod:`.keys`, :mod:`.model`) are
read by the settings, which the Spark jobs' package carries without the daemon
(deploy/spark/package.py), so importing them must not load the coordinator.
"""
