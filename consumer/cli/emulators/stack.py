"""The embedded local AWS stack: kinesalite for Kinesis, moto for DynamoDB and S3.

``LocalStack(kinesis="kinesis-local")`` serves Kinesis with kinesis-local instead: the
emulator with enhanced fan-out (SubscribeToShard), slower as shards fill.

Both emulators run as plain child processes on 127.0.0.1 with ephemeral ports (see
EMULATORS.md for why these two). We stop exactly the processes we started, by PID.
Each child also exits by itself when its stdin pipe closes, so a parent that dies
without cleaning up (a killed test run) leaves no orphan listening.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any, Self

import botocore.exceptions
import botocore.session
from botocore.config import Config

EMULATORS_DIR = Path(__file__).resolve().parent
NODE_MODULES = EMULATORS_DIR / "node_modules"
KINESALITE_LAUNCHER = EMULATORS_DIR / "kinesalite_server.js"
KINESIS_LOCAL_LAUNCHER = EMULATORS_DIR / "kinesis_local_server.js"
KINESIS_EMULATORS = ("kinesalite", "kinesis-local")
HOST = "127.0.0.1"
REGION = "us-east-1"
# Emulators accept any credentials; fixed values keep runs reproducible and make it
# obvious in logs that a client talks to the local stack, not to AWS.
DUMMY_CREDENTIAL = "lander-local"

_NPM_CI_ARGS = ("ci", "--omit=optional", "--no-audit", "--no-fund")


class LocalStackError(RuntimeError):
    """The local stack could not be started (missing tool, child failed, timeout)."""


def install_node_modules(npm: str | None = None) -> None:
    """Install the pinned npm emulators (kinesalite) into ``consumer/cli/emulators/``.

    Runs ``npm ci`` from the committed lockfile; ``--omit=optional`` skips leveldown,
    a native module kinesalite only needs for an on-disk store.
    """
    npm = npm or shutil.which("npm")
    if npm is None:
        raise LocalStackError("npm not found on PATH: install Node.js (20 or later) and npm")
    # cwd (rather than --prefix) so that the committed .npmrc beside package.json applies.
    subprocess.run([npm, *_NPM_CI_ARGS], cwd=EMULATORS_DIR, check=True)


@dataclass
class _Child:
    """One emulator process; stdout and stderr go to unlinked temp files.

    Files rather than pipes: nobody drains them while the stack runs, and a full
    pipe would block the child.
    """

    name: str
    proc: subprocess.Popen[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]
    port: int = field(default=0)

    @classmethod
    def spawn(cls, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> _Child:
        # Not `with`: the files live as long as the child and close in stop().
        stdout = tempfile.TemporaryFile(prefix=f"lander-{name}-out-")  # noqa: SIM115
        stderr = tempfile.TemporaryFile(prefix=f"lander-{name}-err-")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, env=env
            )
        except OSError:
            stdout.close()
            stderr.close()
            raise
        return cls(name, proc, stdout, stderr)

    @staticmethod
    def _read(f: IO[bytes], limit: int) -> str:
        # pread: the child shares the file offset, so seeking ours would move its writes.
        size = os.fstat(f.fileno()).st_size
        start = max(0, size - limit)
        return os.pread(f.fileno(), size - start, start).decode(errors="replace")

    def stderr_tail(self, limit: int = 4000) -> str:
        """The last ``limit`` bytes the child wrote to stderr."""
        return self._read(self.stderr, limit).strip() or "(no output on stderr)"

    def failure(self, what: str) -> LocalStackError:
        """An error naming the child, its exit status and its stderr tail."""
        status = self.proc.poll()
        state = "still running" if status is None else f"exited with status {status}"
        return LocalStackError(
            f"{self.name} (pid {self.proc.pid}) {what}; it is {state}. stderr:\n"
            f"{self.stderr_tail()}"
        )

    def wait_for_port(self, deadline: float) -> int:
        """Wait for the launcher's JSON line ``{"port": N, ...}`` on stdout."""
        while True:
            out = self._read(self.stdout, 4096)
            if "\n" in out:
                try:
                    self.port = int(json.loads(out.splitlines()[0])["port"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise self.failure(f"printed an unexpected first line {out!r}") from exc
                return self.port
            if self.proc.poll() is not None:
                raise self.failure("exited before listening")
            if time.monotonic() > deadline:
                raise self.failure("did not report a port in time")
            time.sleep(0.02)

    def stop(self, timeout: float) -> None:
        """Close stdin, SIGTERM, wait, then SIGKILL: this PID only."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout)
        finally:
            self.stdout.close()
            self.stderr.close()


def _client(service: str, endpoint: str) -> Any:
    # Any: botocore clients are generated at run time; the stubs give no methods.
    return botocore.session.get_session().create_client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=DUMMY_CREDENTIAL,
        aws_secret_access_key=DUMMY_CREDENTIAL,
        config=Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 1}),
    )


def _stream_status(kinesis: Any, name: str) -> str:
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    return str(summary["StreamStatus"])


class LocalStack:
    """kinesalite (Kinesis) and one serialised moto server (DynamoDB, S3) on loopback.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. ``stop`` is
    idempotent and also runs at interpreter exit.
    """

    def __init__(
        self,
        *,
        startup_timeout: float = 60.0,
        stop_timeout: float = 5.0,
        kinesalite_options: Mapping[str, int] | None = None,
        kinesis: str = "kinesalite",
    ) -> None:
        """``kinesalite_options`` override the launcher's flags, e.g. ``{"createStreamMs": 0}``;
        ``kinesis`` picks the Kinesis emulator (kinesalite, or kinesis-local for fan-out)."""
        if kinesis not in KINESIS_EMULATORS:
            raise LocalStackError(f"unknown Kinesis emulator {kinesis!r}: {KINESIS_EMULATORS}")
        self.kinesis = kinesis
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.kinesalite_options = dict(kinesalite_options or {})
        self._kinesalite: _Child | None = None
        self._moto: _Child | None = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> Self:
        """Start both emulators and return once each has answered a real request."""
        with self._lock:
            if self._kinesalite is not None or self._moto is not None:
                raise LocalStackError("LocalStack is already started")
            node = shutil.which("node")
            if node is None:
                raise LocalStackError("node not found on PATH: install Node.js 20 or later")
            if not (NODE_MODULES / self.kinesis / "package.json").is_file():
                raise LocalStackError(
                    f"{self.kinesis} is not installed in {NODE_MODULES}: run `lander "
                    "local-stack --install` (npm ci of the pinned emulators; `make emulators` "
                    "in a clone)"
                )
            atexit.register(self.stop)
            try:
                if self.kinesis == "kinesis-local":
                    argv = [node, str(KINESIS_LOCAL_LAUNCHER)]
                else:
                    flags = [f"--{k}={v}" for k, v in self.kinesalite_options.items()]
                    argv = [node, str(KINESALITE_LAUNCHER), *flags]
                self._kinesalite = _Child.spawn(self.kinesis, argv)
                self._moto = _Child.spawn(
                    "moto",
                    [sys.executable, "-m", "consumer.cli.emulators.moto_server"],
                    env=self._moto_env(),
                )
                deadline = time.monotonic() + self.startup_timeout
                self._kinesalite.wait_for_port(deadline)
                self._moto.wait_for_port(deadline)
                self._wait_ready(deadline)
            except BaseException:
                self._stop_locked()
                raise
        return self

    def stop(self) -> None:
        """Stop exactly the processes this stack started. Safe to call repeatedly."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        children = [c for c in (self._kinesalite, self._moto) if c is not None]
        self._kinesalite = self._moto = None
        for child in children:
            child.stop(self.stop_timeout)
        atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @staticmethod
    def _moto_env() -> dict[str, str]:
        # The child imports consumer.cli.emulators.moto_server: make sure it finds this
        # checkout even when the package is not installed in the interpreter.
        # The project root, not the ``consumer`` package: with the package folder on
        # the path, its modules would shadow top-level ones (``config``, ``errors``).
        env = dict(os.environ)
        root = str(EMULATORS_DIR.parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return env

    def _wait_ready(self, deadline: float) -> None:
        # A real request per service; the DynamoDB and S3 calls also make moto import
        # those backends now instead of during the first test.
        checks: list[tuple[_Child, str, str]] = [
            (self._require(self._kinesalite), "kinesis", "list_streams"),
            (self._require(self._moto), "dynamodb", "list_tables"),
            (self._require(self._moto), "s3", "list_buckets"),
        ]
        for child, service, operation in checks:
            client = _client(service, self._url(child))
            try:
                while True:
                    try:
                        getattr(client, operation)()
                        break
                    except Exception as exc:
                        if child.proc.poll() is not None or time.monotonic() > deadline:
                            raise child.failure(f"did not answer {service} {operation}") from exc
                        time.sleep(0.05)
            finally:
                client.close()

    # -- where the services are --------------------------------------------------

    @staticmethod
    def _require(child: _Child | None) -> _Child:
        if child is None:
            raise LocalStackError("LocalStack is not started")
        return child

    @staticmethod
    def _url(child: _Child) -> str:
        return f"http://{HOST}:{child.port}"

    @property
    def kinesis_endpoint(self) -> str:
        """URL of the Kinesis emulator (kinesalite or kinesis-local)."""
        return self._url(self._require(self._kinesalite))

    @property
    def dynamodb_endpoint(self) -> str:
        """URL of the moto server (DynamoDB)."""
        return self._url(self._require(self._moto))

    @property
    def s3_endpoint(self) -> str:
        """URL of the moto server (S3); the same process as DynamoDB."""
        return self._url(self._require(self._moto))

    @property
    def kms_endpoint(self) -> str:
        """URL of the moto server (KMS, for encrypted archives); the same process."""
        return self._url(self._require(self._moto))

    @property
    def pids(self) -> dict[str, int]:
        """PIDs of the running emulators by name (empty when stopped)."""
        return {c.name: c.proc.pid for c in (self._kinesalite, self._moto) if c is not None}

    def dead_children(self) -> list[str]:
        """Emulators that have exited although the stack was not stopped."""
        return [
            f"{c.name} (pid {c.proc.pid}) exited with status {c.proc.returncode}"
            for c in (self._kinesalite, self._moto)
            if c is not None and c.proc.poll() is not None
        ]

    def env(self) -> dict[str, str]:
        """Environment variables that point AWS SDKs (and the lander) at this stack."""
        return {
            "AWS_ENDPOINT_URL_KINESIS": self.kinesis_endpoint,
            "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb_endpoint,
            "AWS_ENDPOINT_URL_S3": self.s3_endpoint,
            "AWS_ENDPOINT_URL_KMS": self.kms_endpoint,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIAL,
            "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIAL,
        }

    def export_lines(self) -> list[str]:
        """``export K=V`` lines for a POSIX shell."""
        return [f"export {k}={shlex.quote(v)}" for k, v in self.env().items()]


@dataclass(frozen=True)
class Provision:
    """What ``lander local-stack`` creates once the emulators answer: streams of
    ``shards`` shards each (waited for until ACTIVE) and buckets."""

    streams: tuple[str, ...] = ()
    shards: int = 1
    buckets: tuple[str, ...] = ()

    def apply(self, stack: LocalStack, timeout: float = 30.0) -> list[str]:
        """Create what is missing; one comment line per resource, for the operator."""
        kinesis = _client("kinesis", stack.kinesis_endpoint)
        s3 = _client("s3", stack.s3_endpoint)
        try:
            return self._create(kinesis, s3, timeout)
        except botocore.exceptions.ClientError as exc:
            error = exc.response.get("Error", {})
            raise LocalStackError(
                f"cannot create {exc.operation_name.removeprefix('Create').lower()}: "
                f"{error.get('Code', '')}: {error.get('Message', '')}"
            ) from None
        finally:
            kinesis.close()
            s3.close()

    def _create(self, kinesis: Any, s3: Any, timeout: float) -> list[str]:
        said: list[str] = []
        for name in self.streams:
            kinesis.create_stream(StreamName=name, ShardCount=self.shards)
            deadline = time.monotonic() + timeout
            while _stream_status(kinesis, name) != "ACTIVE":
                if time.monotonic() > deadline:
                    raise LocalStackError(f"stream {name} not ACTIVE within {timeout:.0f} s")
                time.sleep(0.1)
            said.append(f"# created stream {name} ({self.shards} shards)")
        for name in self.buckets:
            s3.create_bucket(Bucket=name)
            said.append(f"# created bucket {name}")
        return said

    def settings_lines(self) -> list[str]:
        """``export LANDER_...`` lines for a worker of the one stream (its lease table
        named after it), landing in the first bucket if there is one (the README's "Run
        a worker")."""
        if len(self.streams) != 1:
            return []
        stream = self.streams[0]
        lines = [
            f"export LANDER_STREAM={shlex.quote(stream)}",
            f"export LANDER_LEASE_TABLE={shlex.quote(stream + '-leases')}",
        ]
        if self.buckets:
            lines.append(f"export LANDER_ARCHIVE={shlex.quote(f's3://{self.buckets[0]}/lander')}")
        return lines


def run_local_stack(
    print_fn: Callable[[str], object] = print,
    provision: Provision | None = None,
    env_file: Path | None = None,
) -> int:
    """Start the stack, create what ``provision`` asks for, print the export lines (and
    write them to ``env_file`` at once, whole, for a script to wait for and source),
    block until SIGINT/SIGTERM, stop.

    Returns the process exit status: 0 after a signal, 1 if an emulator died.
    """
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with LocalStack() as stack:
            provision = provision or Provision()
            created = provision.apply(stack)
            exports = [*stack.export_lines(), *provision.settings_lines()]
            if env_file is not None:
                partial = env_file.with_name(env_file.name + ".partial")
                partial.write_text("\n".join(exports) + "\n")
                partial.replace(env_file)
            for line in [*exports, *created]:
                print_fn(line)
            print_fn(f"# local stack running (pids {stack.pids}); Ctrl-C stops it")
            sys.stdout.flush()
            # Poll so that a crashed emulator ends this command instead of hanging it.
            while not stopping.wait(1.0):
                dead = stack.dead_children()
                if dead:
                    print_fn("# emulator died: " + "; ".join(dead))
                    return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
