"""Leases: which worker processes which shard, decided through conditional writes.

The lease model and pure decisions, the store interface with its DynamoDB and
in-memory backends, the coordinator that carries out the decisions for one worker,
and the worker-id claim. May import consumer.aws, errors and sequence only.
"""

from consumer.leases.coordinator import HeldLease, LeaseCoordinator
from consumer.leases.model import Lease, LeaseLostError
from consumer.leases.store import LeaseStore, TableMissingError

__all__ = [
    "HeldLease",
    "Lease",
    "LeaseCoordinator",
    "LeaseLostError",
    "LeaseStore",
    "TableMissingError",
]
