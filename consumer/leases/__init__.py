"""Leases: which worker processes which shard, decided through conditional writes."""

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
