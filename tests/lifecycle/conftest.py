"""Fixtures of the lifecycle tests that run real worker processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster


@pytest.fixture
def make_cluster(aws_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Build clusters; every worker started is stopped (by PID) at the end."""
    made: list[Cluster] = []

    def make(shards: int, **extra_env: str) -> Cluster:
        cluster = Cluster(aws_env, tmp_path / f"c{len(made)}", shards, extra_env=extra_env)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all()
