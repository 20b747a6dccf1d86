"""Fixtures of the lifecycle tests that run real worker processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.cluster import Cluster

# Each scenario runs under board coordination (the default's choice on a new table) in
# the fast tier; its scan twin is in the deep tier: the lease stores' contract tests hold
# both modes to the same rules, so the twin repeats the scenario only to change the mode.
MODES = ["board", pytest.param("scan", marks=pytest.mark.deep)]


@pytest.fixture(params=MODES)
def make_cluster(
    aws_env: dict[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Cluster]]:
    """Build clusters, under each coordination mode (scan in the deep tier); every worker
    started is stopped (by PID) at the end."""
    made: list[Cluster] = []

    def make(shards: int, **extra_env: str) -> Cluster:
        env = {"LANDER_COORDINATION": request.param, **extra_env}
        cluster = Cluster(aws_env, tmp_path / f"c{len(made)}", shards, extra_env=env)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all()
