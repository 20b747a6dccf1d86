"""Run the built images against the embedded local stack on the host's loopback.

1. the bootstrap image creates the stream, the lease table and the bucket;
2. three worker containers (``--net=host``, non-root, read-only root filesystem, no
   capabilities, no ``LANDER_WORKER_ID``) take the shards between them with three
   distinct worker ids, answer ``/readyz`` and their HEALTHCHECK;
3. ``lander produce`` from the worker image writes events (producer retries, KPL
   aggregates, a few bad payloads);
4. once the workers have read every record, SIGTERM: each lands what it buffered
   (the flush interval is longer than the run, so what lands, lands at shutdown),
   checkpoints, releases and exits 0; the archive then holds every record in the stream
   exactly once (or as a dead letter) and every lease is free at the shard's last record;
5. the Spark image compacts that archive (copied to a folder mounted into it) and the
   compacted table holds one row per event id in the stream.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from consumer.leases.model import Lease

from . import checks
from .engine import CheckError, Engine

STREAM = "imagecheck"
TABLE = "imagecheck-leases"
ARCHIVE = "s3://imagecheck/kinesis"
SHARDS = 4
WORKERS = 3
EVENTS = 3000
# How every container of the check runs: as in deploy/k8s (read-only root, all
# capabilities dropped, no privilege gain, a tmpfs for /tmp), on the host's network.
LOCKED_DOWN = (
    "--net=host",
    "--read-only",
    "--tmpfs",
    "/tmp",
    "--cap-drop=all",
    "--security-opt=no-new-privileges",
)


@dataclass(frozen=True, slots=True)
class Images:
    """The tags the check built."""

    worker: str
    bootstrap: str
    spark: str


def free_port() -> int:
    """A loopback port nobody listens on now (the worker binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_status(url: str) -> int:
    """The status of a GET, 0 if nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def ready(url: str) -> bool | None:
    """True once ``url`` answers 200, else None (for :func:`checks.wait_for`)."""
    return True if http_status(url) == 200 else None


def records_read(port: int) -> int:
    """``lander_records_read_total`` summed over shards, from a worker's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
        text = response.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("lander_records_read_total{")
    )


# The container's view of itself: who PID 1 runs as, its effective capabilities, and
# whether the root filesystem takes a write.
_SELF_CHECK = (
    "import json,re\n"
    "s=open('/proc/1/status').read()\n"
    "uid=re.search(r'^Uid:\\s+(\\d+)',s,re.M).group(1)\n"
    "cap=re.search(r'^CapEff:\\s+(\\w+)',s,re.M).group(1)\n"
    "try:\n"
    "    open('/opt/lander/probe','w'); ro=False\n"
    "except OSError:\n"
    "    ro=True\n"
    "print(json.dumps({'uid':uid,'cap_eff':cap,'read_only':ro}))\n"
)


@dataclass
class Smoke:
    """One smoke run; ``containers`` are removed by :meth:`cleanup` whatever happens."""

    engine: Engine
    images: Images
    aws: Mapping[str, str]
    workdir: Path
    containers: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)

    def _env(self, extra: Mapping[str, str]) -> list[str]:
        settings = {
            **self.aws,
            "LANDER_STREAM": STREAM,
            "LANDER_LEASE_TABLE": TABLE,
            "LANDER_ARCHIVE": ARCHIVE,
            **extra,
        }
        return [a for k, v in settings.items() for a in ("-e", f"{k}={v}")]

    def run_once(self, image: str, *args: str, extra: Mapping[str, str] | None = None) -> str:
        """A container that runs to completion on the host network; its output."""
        return self.engine.podman(
            "run",
            "--rm",
            *LOCKED_DOWN,
            *self._env(extra or {}),
            image,
            *args,
        )

    def start_worker(self, name: str) -> None:
        """A detached worker container with its own metrics port."""
        port = free_port()
        self.containers.append(name)
        self.engine.podman(
            "run",
            "-d",
            "--name",
            name,
            *LOCKED_DOWN,
            *self._env(
                {
                    "LANDER_METRICS_HOST": "127.0.0.1",
                    "LANDER_METRICS_PORT": str(port),
                    "LANDER_EVENT_ID_POINTER": "/event_id",
                    "LANDER_FAILOVER_SECONDS": "6",
                    "LANDER_FLUSH_SECONDS": "300",
                    "LANDER_SHUTDOWN_SECONDS": "20",
                }
            ),
            self.images.worker,
        )
        self.ports[name] = port

    def cleanup(self) -> None:
        """Save each container's log under the work folder, then remove it."""
        self.engine.save_logs(self.containers, self.workdir / "logs")
        for name in self.containers:
            self.engine.run("podman", "rm", "-f", "-t", "2", name, check=False, quiet=True)
        self.containers.clear()


@contextmanager
def smoke_run(
    engine: Engine, images: Images, aws: Mapping[str, str], workdir: Path
) -> Iterator[Smoke]:
    """A :class:`Smoke` whose containers are removed on the way out."""
    smoke = Smoke(engine, images, aws, workdir)
    try:
        yield smoke
    finally:
        smoke.cleanup()


def run(engine: Engine, images: Images, endpoints: Mapping[str, str], workdir: Path) -> None:
    """The whole smoke test; raises :class:`CheckError` on the first failure."""
    say = engine.say
    kinesis = checks.client("kinesis", endpoints["AWS_ENDPOINT_URL_KINESIS"])
    dynamodb = checks.client("dynamodb", endpoints["AWS_ENDPOINT_URL_DYNAMODB"])
    s3 = checks.client("s3", endpoints["AWS_ENDPOINT_URL_S3"])
    with smoke_run(engine, images, endpoints, workdir) as smoke:
        smoke.run_once(images.bootstrap, "bootstrap", "--shards", str(SHARDS))
        shards = kinesis.list_shards(StreamName=STREAM)["Shards"]
        s3.head_bucket(Bucket=ARCHIVE.removeprefix("s3://").split("/")[0])
        table = dynamodb.describe_table(TableName=TABLE)["Table"]["TableStatus"]
        if len(shards) != SHARDS or table != "ACTIVE":
            raise CheckError(f"bootstrap image: {len(shards)} shards (not {SHARDS}), table {table}")
        say(f"bootstrap image: stream {STREAM!r} ({SHARDS} shards), lease table, bucket created")

        names = [f"imagecheck-worker-{i}" for i in range(1, WORKERS + 1)]
        for name in names:
            smoke.start_worker(name)
        for name in names:
            url = f"http://127.0.0.1:{smoke.ports[name]}/readyz"
            checks.wait_for(f"{name} {url}", partial(ready, url), 90)
        owners = checks.wait_for(
            "every shard owned by three workers",
            lambda: _owners(checks.leases(dynamodb, TABLE)),
            120,
        )
        say(
            f"worker image: {WORKERS} workers ready, {len(owners)} distinct ids without "
            f"LANDER_WORKER_ID; shards per worker id {owners}"
        )
        for name in names:
            seen = json.loads(engine.podman("exec", name, "python", "-c", _SELF_CHECK))
            if seen != {"uid": "10001", "cap_eff": "0000000000000000", "read_only": True}:
                raise CheckError(f"{name}: expected uid 10001, no capabilities, read-only; {seen}")
            engine.podman("healthcheck", "run", name)
        say("worker image: uid 10001, no capabilities, read-only root; HEALTHCHECK healthy")

        smoke.run_once(
            images.worker,
            "produce",
            "--count",
            str(EVENTS),
            "--rate",
            "0",
            "--retry-share",
            "0.05",
            "--aggregate-share",
            "0.3",
            "--bad-records",
            "3",
        )
        records = checks.stream_records(kinesis, STREAM)
        say(f"lander produce (worker image): {len(records)} user records in the stream")
        checks.wait_for(
            "the workers to read every record",
            lambda: (
                True if sum(records_read(smoke.ports[n]) for n in names) >= len(records) else None
            ),
            120,
        )
        before = checks.archive_view(s3, ARCHIVE, workdir / "archive", STREAM)
        started = time.monotonic()
        engine.podman("stop", "-t", "35", *names)
        took = time.monotonic() - started
        codes = {n: engine.podman("inspect", "--format", "{{.State.ExitCode}}", n) for n in names}
        if set(codes.values()) != {"0"}:
            raise CheckError(f"worker exit codes on SIGTERM: {codes}")
        view = checks.archive_view(s3, ARCHIVE, workdir / "archive", STREAM)
        landing = checks.compare(records, view.landed, view.dead)
        say(
            f"SIGTERM: all exited 0 in {took:.1f} s; objects landed before it "
            f"{before.files}, after {view.files}"
        )
        say(f"archive: {landing.line()}")
        if not landing.exact:
            raise CheckError("the archive does not hold the stream exactly once")
        problems = checks.released_at_end(checks.leases(dynamodb, TABLE), records)
        if problems:
            raise CheckError("leases after shutdown: " + "; ".join(problems))
        say("leases: all released, each checkpointed at its shard's last record")
        compact(smoke, workdir, view.days, checks.event_ids(records))


def _owners(found: list[Lease]) -> dict[str, int] | None:
    """Shards per owner once every lease is owned and every worker owns one."""
    if len(found) < SHARDS or any(lease.owner is None for lease in found):
        return None
    per: dict[str, int] = {}
    for lease in found:
        per[str(lease.owner)] = per.get(str(lease.owner), 0) + 1
    return per if len(per) == WORKERS else None


def compact(smoke: Smoke, workdir: Path, days: set[str], ids: set[str]) -> None:
    """The Spark image compacts the copied archive; the table has one row per event id."""
    archive = (workdir / "archive").resolve()
    out = (workdir / "compacted").resolve()
    out.mkdir(mode=0o777, exist_ok=True)
    out.chmod(0o777)  # the image runs as uid 10001
    for day in sorted(days):
        started = time.monotonic()
        smoke.engine.podman(
            "run",
            "--rm",
            *LOCKED_DOWN,
            "-v",
            f"{archive}:{archive}:ro",
            "-v",
            f"{out}:{out}",
            "-e",
            f"LANDER_ARCHIVE={archive.as_uri()}",
            "-e",
            f"LANDER_STREAM={STREAM}",
            "-e",
            f"LANDER_COMPACTED={out.as_uri()}",
            "-e",
            f"LANDER_WINDOW={day}",
            smoke.images.spark,
            "compact",
        )
        smoke.engine.say(f"spark image: compacted {day} in {time.monotonic() - started:.0f} s")
    checks.compacted_once(out.as_uri(), STREAM, ids, "spark image", prints=smoke.engine.say)
    manifests = (out / "_manifests" / f"stream={STREAM}").glob("*.json")
    readers = sorted({json.loads(path.read_text()).get("reader") for path in manifests})
    if readers != ["objects"]:  # the image carries the object reader's jar
        raise CheckError(f"spark image: objects read by {readers}, not by the object reader")
    smoke.engine.say("spark image: objects read whole, by the object reader")
