"""The image check's own logic (deploy/imagecheck): comparisons and configuration.

The check itself builds and runs images (``make image-check``, CI after the tests);
these tests pin what it decides from what it reads.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from consumer.leases.model import Lease
from consumer.sequence import Position, Sentinel
from deploy.imagecheck import checks, compose, engine

REPO = Path(__file__).resolve().parents[2]


def test_compare_counts_missing_extra_and_copies() -> None:
    stream = [("s0", "1", 0), ("s0", "2", 0), ("s1", "3", 1)]
    landing = checks.compare(stream, Counter({("s0", "1", 0): 2}), Counter({("s1", "9", 0): 1}))
    assert (landing.missing, landing.extra, landing.copies) == (2, 1, 1)
    assert (landing.records, landing.landed, landing.dead) == (3, 2, 1)
    assert not landing.exact


def test_compare_exact_when_each_place_is_landed_or_dead_once() -> None:
    stream = [("s0", "1", 0), ("s0", "1", 1), ("s1", "3", 0)]
    landed = Counter({("s0", "1", 0): 1, ("s0", "1", 1): 1})
    assert checks.compare(stream, landed, Counter({("s1", "3", 0): 1})).exact
    # A record both landed and dead-lettered is a copy too.
    both = Counter({("s1", "3", 0): 1})
    assert checks.compare(stream, landed + both, both).copies == 1
    # An empty stream proves nothing.
    assert not checks.compare([], Counter(), Counter()).exact


def test_released_at_end_wants_no_owner_and_the_last_record() -> None:
    records = [("s0", "10", 0), ("s0", "12", 2), ("s0", "12", 1), ("s1", "5", 0)]
    good = [Lease("s0", checkpoint=Position(12, 2)), Lease("s1", checkpoint=Position(5))]
    assert checks.released_at_end(good, records) == []
    bad = [
        Lease("s0", owner="w1", checkpoint=Position(12, 2)),
        Lease("s1", checkpoint=Sentinel.TRIM_HORIZON),
    ]
    problems = checks.released_at_end(bad, records)
    assert len(problems) == 2
    assert "s0 still owned by w1" in problems[0]
    assert problems[1].startswith("s1 checkpoint")


def test_event_ids_skip_what_is_not_a_json_object() -> None:
    records = {
        ("s0", "1", 0): b'{"event_id": "a"}',
        ("s0", "2", 0): b'{"event_id": "a"}',
        ("s0", "3", 0): b"\xff not utf-8",
        ("s0", "4", 0): b"[1, 2]",
        ("s0", "5", 0): b'{"event_id": 7}',
    }
    assert checks.event_ids(records) == {"a", "7"}


def test_wait_for_returns_the_first_answer_and_times_out() -> None:
    answers = iter([None, None, 3])
    assert checks.wait_for("three", lambda: next(answers), 5, step=0) == 3
    with pytest.raises(engine.CheckError, match="waiting for nothing"):
        checks.wait_for("nothing", lambda: None, 0, step=0)


def test_apt_mirror_reads_deb822_and_one_line_sources(tmp_path: Path) -> None:
    deb822 = tmp_path / "debian.sources"
    deb822.write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\n"
    )
    assert engine.apt_mirror([tmp_path / "absent", deb822]) == "http://mirror.example/debian"
    one_line = tmp_path / "sources.list"
    one_line.write_text("# comment\ndeb [arch=amd64] http://other.example/debian bookworm main\n")
    assert engine.apt_mirror([one_line]) == "http://other.example/debian"
    with pytest.raises(engine.CheckError, match="no Debian mirror"):
        engine.apt_mirror([tmp_path / "absent"])


def test_the_standin_is_named_as_the_dockerfile_names_its_base() -> None:
    name = engine.base_image(REPO / "Dockerfile")
    assert name.startswith("docker.io/library/python:3.11.")
    assert name.endswith("-slim-bookworm")
    text = engine.standin_containerfile("localhost/bookworm-minbase:latest", ["a.crt"])
    assert text.startswith("FROM localhost/bookworm-minbase:latest\n")
    assert "COPY a.crt /usr/local/share/ca-certificates/a.crt" in text
    assert "update-ca-certificates" in text


def test_engine_keeps_its_storage_and_config_in_the_work_folder(tmp_path: Path) -> None:
    tools = engine.Engine(tmp_path, engine.Say())
    env = tools.env
    assert env["CONTAINERS_STORAGE_CONF"] == str(tmp_path / "storage.conf")
    assert env["CONTAINERS_CONF"] == str(tmp_path / "containers.conf")
    storage = (tmp_path / "storage.conf").read_text()
    assert f'graphroot = "{tmp_path / "storage" / "graph"}"' in storage
    conf = (tmp_path / "containers.conf").read_text()
    assert 'runtime = "runc"' in conf
    assert all(limit in conf for limit in engine.ULIMITS)
    # fuse-overlayfs only where the kernel's overlay cannot be mounted.
    assert ("fuse-overlayfs" in storage) is not tools.native


def test_the_overlay_probe_answers_and_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(engine.kernel_overlay(tmp_path), bool)
    assert list(tmp_path.iterdir()) == []

    def refused(argv: list[str], **_: object) -> object:
        raise FileNotFoundError(argv[0])

    monkeypatch.setattr("subprocess.run", refused)
    assert engine.kernel_overlay(tmp_path) is False
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    tools = engine.Engine(tmp_path / "work", engine.Say())
    if not tools.native:
        return
    monkeypatch.setattr(engine, "kernel_overlay", lambda folder: False)
    fallback = engine.Engine(tmp_path / "fallback", engine.Say())
    assert (
        'mount_program = "/usr/bin/fuse-overlayfs"'
        in (tmp_path / "fallback" / "storage.conf").read_text()
    )
    assert not fallback.native


def _load_override(text: str) -> dict[str, Any]:
    """The override as podman-compose reads it: ``!reset`` drops, ``!override`` replaces."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]  # yaml has no stubs here
        pass

    Loader.add_constructor("!reset", lambda loader, node: ("reset", None))
    Loader.add_constructor(
        "!override", lambda loader, node: ("override", loader.construct_sequence(node))
    )
    loaded: dict[str, Any] = yaml.load(text, Loader=Loader)
    return loaded


def test_the_compose_override_puts_every_service_on_the_emulators(tmp_path: Path) -> None:
    endpoints = {
        "AWS_ENDPOINT_URL_KINESIS": "http://127.0.0.1:4001",
        "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:4002",
        "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:4002",
        "AWS_REGION": "us-east-1",
    }
    folders = {"archive": tmp_path / "archive", "out": tmp_path / "out"}
    text = compose.override(endpoints, {"worker-1": 9501, "worker-2": 9502}, folders)
    services = _load_override(text)["services"]
    base = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    assert set(services) <= set(base)  # overrides only, no new service
    for name, service in services.items():
        assert service["network_mode"] == "host", name
        env = service["environment"]
        assert {k: env[k] for k in endpoints if k.startswith("AWS_ENDPOINT_URL_")} == {
            k: v for k, v in endpoints.items() if k.startswith("AWS_ENDPOINT_URL_")
        }
    # Each published port goes; each worker its own metrics port on loopback.
    for name in ("localstack", "worker-1", "worker-2"):
        assert services[name]["ports"] == ("reset", None)
    assert services["worker-2"]["environment"]["LANDER_METRICS_PORT"] == "9502"
    assert services["worker-1"]["environment"]["LANDER_METRICS_HOST"] == "127.0.0.1"
    # The placeholder's healthcheck replaces LocalStack's (podman-compose appends lists).
    kind, test = services["localstack"]["healthcheck"]["test"]
    assert kind == "override"
    assert test[:3] == ["CMD", "python", "-c"]
    # The compaction reads the copied archive and writes where the host reads.
    env = services["compaction"]["environment"]
    assert env["LANDER_ARCHIVE"] == folders["archive"].as_uri()
    assert env["PYICEBERG_CATALOG__LANDER__URI"] == f"sqlite:///{tmp_path}/out/compacted/catalog.db"
    assert f"{folders['archive']}:{folders['archive']}:ro" in services["compaction"]["volumes"]
    # The producer and smoke commands are the base file's subcommands.
    assert services["producer"]["command"][0] == base["producer"]["command"][0] == "produce"
    assert services["smoke"]["command"][0] == base["smoke"]["command"][0] == "smoke"


def test_podman_compose_is_pinned() -> None:
    pins = compose.REQUIREMENTS.read_text().split()
    assert pins == ["podman-compose==1.6.0"]
