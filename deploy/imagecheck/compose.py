"""docker-compose.yml run by podman-compose, its AWS service served by the embedded stack.

The project's compose file starts LocalStack in a container. Here the emulators run on
the host's loopback instead (kinesalite for Kinesis, moto for DynamoDB and S3, as in the
tests), and an override file generated per run (:func:`override`) changes only what that
takes:

- every service uses the host's network (``network_mode: host``), so the containers
  reach the emulators on 127.0.0.1 and no CNI network or DNS plugin is needed; the
  published ports go (``!reset``), and each worker gets its own metrics port;
- (podman-compose replaces ``command`` and ``entrypoint`` but appends lists such as a
  healthcheck's ``test``, hence ``!override`` there;)
- the ``localstack`` service becomes a placeholder on the bootstrap image whose
  healthcheck asks the three emulators, so ``depends_on`` keeps its meaning;
- the per-service endpoint variables (``AWS_ENDPOINT_URL_KINESIS`` and friends) point
  every client at the emulators; they win over the file's ``AWS_ENDPOINT_URL``;
- a 5 s flush, a smaller producer run, and a compaction of the archive copied to a
  folder (file://): the ``spark`` image built without the S3A jars reads no s3a://.

Then: bootstrap; two workers; the producer; the ``smoke`` service; the archive checked
record by record against the stream; the workers stopped (SIGTERM, exit 0, leases
released); the compaction (compact, analyse, maintain) and its table checked against
the stream's event ids; ``down -v``.

podman-compose ignores ``condition: service_healthy`` on podman older than 4.6 (Debian
12 has 4.3) and maps ``service_completed_successfully`` to "stopped", whatever the exit
status. So the check starts each step with ``--no-deps`` and waits itself: for the
placeholder's healthcheck, for bootstrap and the producer to exit 0.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from . import checks, smoke
from .engine import CheckError, Engine

PROJECT = "imagecheck"
WORKERS = ("worker-1", "worker-2")
STREAM = "orders"  # docker-compose.yml's LANDER_STREAM
TABLE = "orders-leases"
ARCHIVE = "s3://lander-local/kinesis"
PRODUCE = (
    "produce",
    "--rate",
    "1000",
    "--count",
    "4000",
    "--payload-size",
    "256",
    "--retry-share",
    "0.05",
    "--aggregate",
)
REQUIREMENTS = Path(__file__).with_name("requirements-compose.txt")

# The placeholder's healthcheck: every emulator answers HTTP (any status).
_PROBE = (
    "import os,sys,urllib.request as u,urllib.error as e\n"
    "for k in ('KINESIS','DYNAMODB','S3'):\n"
    "    try: u.urlopen(os.environ['AWS_ENDPOINT_URL_'+k],timeout=2)\n"
    "    except e.HTTPError: pass\n"
    "    except OSError: sys.exit(1)\n"
)


def _yaml(value: object) -> str:
    """A scalar or a flow list as YAML (JSON is YAML)."""
    return json.dumps(value)


def override(
    endpoints: Mapping[str, str], ports: Mapping[str, int], folders: Mapping[str, Path]
) -> str:
    """The override file's text. ``folders``: ``archive`` (the copied archive, read-only)
    and ``out`` (the compacted table, reports and catalog)."""
    env = [
        f"      {k}: {_yaml(v)}"
        for k, v in sorted(endpoints.items())
        if k.startswith("AWS_ENDPOINT_URL_")
    ]
    lines = ["services:"]

    def service(name: str, *body: str, environment: Sequence[str] = ()) -> None:
        lines.append(f"  {name}:")
        lines.append("    network_mode: host")
        lines.extend(f"    {b}" for b in body)
        lines.append("    environment:")
        lines.extend(env)
        lines.extend(f"      {e}" for e in environment)

    service(
        "localstack",
        "image: kinesis-lander-bootstrap:local",
        "ports: !reset []",
        f"entrypoint: {_yaml(['python', '-c', 'import time; time.sleep(86400)'])}",
        "healthcheck:",
        f"  test: !override {_yaml(['CMD', 'python', '-c', _PROBE])}",
        "  interval: 2s",
        "  start_period: 1s",
    )
    service("bootstrap")
    for name, port in ports.items():
        service(
            name,
            "ports: !reset []",
            environment=(
                'LANDER_METRICS_HOST: "127.0.0.1"',
                f'LANDER_METRICS_PORT: "{port}"',
                'LANDER_FLUSH_SECONDS: "5"',
                'LANDER_FAILOVER_SECONDS: "6"',
            ),
        )
    service("producer", f"command: {_yaml(list(PRODUCE))}")
    service("smoke", f"command: {_yaml(['smoke', '--timeout', '90'])}")
    archive, out = folders["archive"], folders["out"]
    service(
        "compaction",
        "volumes:",
        f"  - {archive}:{archive}:ro",
        f"  - {out}:{out}",
        environment=(
            f"LANDER_ARCHIVE: {_yaml(archive.as_uri())}",
            f"LANDER_COMPACTED: {_yaml((out / 'compacted').as_uri())}",
            f"LANDER_REPORTS: {_yaml((out / 'reports').as_uri())}",
            f"PYICEBERG_CATALOG__LANDER__URI: {_yaml(f'sqlite:///{out}/compacted/catalog.db')}",
        ),
    )
    return "\n".join(lines) + "\n"


class Compose:
    """``podman-compose -p imagecheck -f docker-compose.yml -f OVERRIDE``."""

    def __init__(self, engine: Engine, repo: Path, override_file: Path) -> None:
        self.engine = engine
        self.base = [
            sys.executable,
            "-m",
            "podman_compose",
            "-p",
            PROJECT,
            "-f",
            str(repo / "docker-compose.yml"),
            "-f",
            str(override_file),
        ]

    def __call__(self, *args: str, check: bool = True, timeout: float = 600) -> str:
        done = subprocess.run(
            [*self.base, *args],
            env=self.engine.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise CheckError(
                f"podman-compose {' '.join(args)} exited {done.returncode}\n"
                f"{(done.stdout + done.stderr)[-3000:]}"
            )
        return done.stdout

    def container(self, service: str) -> str:
        """The container podman-compose made for ``service``."""
        names = project_containers(self.engine, service)
        if len(names) != 1:
            raise CheckError(f"compose service {service}: containers {names}")
        return names[0]

    def exited_ok(self, service: str, timeout: float) -> None:
        """Wait for a one-shot service to exit; raise unless with status 0."""
        name = self.container(service)
        code = self.engine.run("podman", "wait", name, quiet=True, timeout=timeout).stdout.strip()
        if code != "0":
            tail = self.engine.run("podman", "logs", "--tail", "20", name, check=False, quiet=True)
            raise CheckError(
                f"compose service {service} exited {code}:\n{tail.stdout}{tail.stderr}"
            )


def project_containers(engine: Engine, service: str | None = None) -> list[str]:
    """Names of the containers podman-compose made for this project (one service's)."""
    labels = [f"com.docker.compose.project={PROJECT}"]
    if service is not None:
        labels.append(f"com.docker.compose.service={service}")
    filters = [a for label in labels for a in ("--filter", f"label={label}")]
    return engine.podman("ps", "-a", "--format", "{{.Names}}", *filters, check=False).split()


def ensure_podman_compose() -> None:
    """Install the pinned podman-compose into this interpreter's environment if missing."""
    if importlib.util.find_spec("podman_compose") is None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
                str(REQUIREMENTS),
            ],
            check=True,
        )


def run(engine: Engine, repo: Path, endpoints: Mapping[str, str], workdir: Path) -> None:
    """The compose stack end to end; raises :class:`CheckError` on the first failure."""
    ensure_podman_compose()
    say = engine.say
    workdir.mkdir(parents=True, exist_ok=True)
    folders = {"archive": (workdir / "archive").resolve(), "out": (workdir / "out").resolve()}
    for folder in (folders["out"], folders["out"] / "compacted"):
        folder.mkdir(exist_ok=True)  # the catalog's SQLite file goes in compacted/
        folder.chmod(0o777)  # the Spark image runs as uid 10001
    ports = {name: smoke.free_port() for name in WORKERS}
    override_file = workdir / "compose.override.yml"
    override_file.write_text(override(endpoints, ports, folders))
    compose = Compose(engine, repo, override_file)
    kinesis = checks.client("kinesis", endpoints["AWS_ENDPOINT_URL_KINESIS"])
    dynamodb = checks.client("dynamodb", endpoints["AWS_ENDPOINT_URL_DYNAMODB"])
    s3 = checks.client("s3", endpoints["AWS_ENDPOINT_URL_S3"])
    try:
        compose("up", "-d", "--no-build", "localstack")
        placeholder = compose.container("localstack")
        checks.wait_for(
            "the localstack placeholder's healthcheck",
            lambda: (
                True
                if engine.run(
                    "podman", "healthcheck", "run", placeholder, check=False, quiet=True
                ).returncode
                == 0
                else None
            ),
            60,
        )
        compose("up", "-d", "--no-build", "--no-deps", "bootstrap")
        compose.exited_ok("bootstrap", 120)
        say("compose: localstack placeholder healthy, bootstrap exited 0")
        compose("up", "-d", "--no-build", "--no-deps", *WORKERS)
        for name, port in ports.items():
            url = f"http://127.0.0.1:{port}/readyz"
            checks.wait_for(f"compose {name} {url}", partial(smoke.ready, url), 90)
        compose("up", "-d", "--no-build", "--no-deps", "producer")
        compose.exited_ok("producer", 300)
        records = checks.stream_records(kinesis, STREAM)
        say(f"compose: two workers ready, producer exited 0; {len(records)} user records")
        compose("--profile", "smoke", "run", "--rm", "--no-deps", "smoke", timeout=180)
        say("compose: smoke service exited 0 (objects landed, every shard owned)")
        landing = checks.wait_for(
            "every record landed", lambda: _exact(s3, folders["archive"], records), 120, step=3
        )
        say(f"compose archive: {landing.line()}")
        started = time.monotonic()
        compose("stop", *WORKERS, timeout=120)
        codes = {
            w: engine.podman("inspect", "--format", "{{.State.ExitCode}}", compose.container(w))
            for w in WORKERS
        }
        if set(codes.values()) != {"0"}:
            raise CheckError(f"compose workers' exit codes on stop: {codes}")
        problems = checks.released_at_end(checks.leases(dynamodb, TABLE), records)
        if problems:
            raise CheckError("compose leases after stop: " + "; ".join(problems))
        final = _exact(s3, folders["archive"], records)
        if final is None:
            raise CheckError("compose archive changed after the workers stopped")
        say(
            f"compose: workers stopped in {time.monotonic() - started:.1f} s, exit 0, "
            "leases released"
        )
        view = checks.archive_view(s3, ARCHIVE, folders["archive"], STREAM)
        for day in sorted(view.days):
            compose(
                "--profile",
                "batch",
                "run",
                "--rm",
                "--no-deps",
                "-e",
                f"LANDER_WINDOW={day}",
                "compaction",
                timeout=900,
            )
        _check_table(engine, folders["out"], view.days, checks.event_ids(records))
        say("compose: compaction (compact, analyse, maintain) exited 0; one row per event id")
    finally:
        engine.save_logs(project_containers(engine), workdir / "logs")
        compose("--profile", "smoke", "--profile", "batch", "down", "-v", "-t", "5", check=False)


def _exact(s3: Any, folder: Path, records: Mapping[checks.Place, bytes]) -> checks.Landing | None:
    view = checks.archive_view(s3, ARCHIVE, folder, STREAM)
    landing = checks.compare(records, view.landed, view.dead)
    if landing.copies or landing.extra:
        raise CheckError(f"compose archive: {landing.line()}")
    return landing if landing.exact else None


def _check_table(engine: Engine, out: Path, days: set[str], ids: set[str]) -> None:
    checks.compacted_once(
        (out / "compacted").as_uri(), STREAM, ids, "compose compaction", prints=engine.say
    )
    reports = sorted((out / "reports").rglob("report.html"))
    if len(reports) < len(days):
        raise CheckError(f"compose compaction: {len(reports)} reports for {len(days)} days")
