"""Podman and buildah without a Docker engine, a registry or a change under /etc.

Everything lives under one work folder: container storage (the kernel's overlay where
this process may mount one, else overlay through fuse-overlayfs; see
:func:`kernel_overlay`), ``storage.conf`` and ``containers.conf`` handed to the tools through
``CONTAINERS_STORAGE_CONF`` and ``CONTAINERS_CONF``, and the stand-in base image.

The stand-in: the Dockerfile starts from ``python:3.11.*-slim-bookworm``, which lives on
Docker Hub. Without a registry we make an image of that name from Debian itself:
``debootstrap --variant=minbase bookworm`` from the machine's own apt mirror, imported
with ``podman import``, plus Debian's python3 (3.11, as the pinned image), ``python`` and
``pip`` links, and the machine's locally added CA certificates so that pip and apt inside
the builds trust the same proxies the host does. It is not the official image (Debian's
3.11.2 rather than 3.11.14, installed under /usr rather than /usr/local); the project's
images only need a Python 3.11 with pip and venv on bookworm.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# apt packages, and one program each that shows it is installed.
TOOLS: dict[str, str] = {
    "buildah": "buildah",
    "podman": "podman",
    "runc": "runc",
    "debootstrap": "debootstrap",
    "fuse-overlayfs": "fuse-overlayfs",
    "slirp4netns": "slirp4netns",
    "uidmap": "newuidmap",
    "containernetworking-plugins": "/usr/lib/cni/bridge",
    "catatonit": "catatonit",
    "conmon": "conmon",
}
# Limits the runtime gives every container; higher ones are refused on these machines.
ULIMITS = ("nofile=20000:20000", "nproc=32768:32768")
LOCAL_CERTS = Path("/usr/local/share/ca-certificates")
# Every build: Docker's image format (OCI drops HEALTHCHECK), the host's network (the
# builds reach apt and pip), and never a registry (the base is the local stand-in).
BUD = ("buildah", "bud", "--format", "docker", "--network", "host", "--pull=never")
SUITE = "bookworm"
# Stages of one build run at once (buildah ``--jobs``): the spark target's package
# installs overlap its venv's pip install.
STAGE_JOBS = 3


def processes_using(folder: Path) -> list[str]:
    """``pid command`` of every process whose command line names ``folder``."""
    found: list[str] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if any(str(folder) in word for word in words):
            found.append(f"{proc.name} {' '.join(words)[:120]}")
    return found


def kernel_overlay(folder: Path) -> bool:
    """Whether this process can mount the kernel's overlay filesystem under ``folder``.

    Root on a host (or a privileged container) can; a rootless or unprivileged one
    cannot, and storage then goes through fuse-overlayfs. The kernel's overlay is the
    faster by far for builds: with fuse-overlayfs every committed layer (each Dockerfile
    instruction under ``--layers``) took 5-13 s here, most of a build's time."""
    probe = Path(tempfile.mkdtemp(prefix="overlay-probe-", dir=folder))
    lower, upper, work, merged = (probe / name for name in ("l", "u", "w", "m"))
    for sub in (lower, upper, work, merged):
        sub.mkdir()
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    try:
        mounted = subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", options, str(merged)],
            capture_output=True,
            check=False,
        )
    except OSError:
        shutil.rmtree(probe, ignore_errors=True)
        return False
    if mounted.returncode == 0:
        subprocess.run(["umount", str(merged)], check=False)
    shutil.rmtree(probe, ignore_errors=True)
    return mounted.returncode == 0


class CheckError(RuntimeError):
    """The image check failed: one message saying what and where to look."""


def _present(program: str) -> bool:
    if program.startswith("/"):
        return Path(program).exists()
    sbin = ("/usr/sbin", "/usr/libexec/podman", "/usr/bin", "/sbin")
    return shutil.which(program) is not None or any(Path(d, program).exists() for d in sbin)


def missing_tools() -> list[str]:
    """The apt packages of :data:`TOOLS` that are not installed."""
    return [package for package, program in TOOLS.items() if not _present(program)]


def install_tools(say: Say) -> None:
    """apt-get install what is missing (root only); nothing if all is there."""
    missing = missing_tools()
    if not missing:
        return
    if os.geteuid() != 0:
        raise CheckError(f"missing {' '.join(missing)}; install them (apt) or run as root")
    say(f"installing {' '.join(missing)} (apt)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", *TOOLS], check=True, env=env, stdout=subprocess.DEVNULL
    )


def apt_mirror(
    sources: Sequence[Path] = (
        Path("/etc/apt/sources.list.d/debian.sources"),
        Path("/etc/apt/sources.list"),
    ),
) -> str:
    """The machine's Debian mirror: the first ``URIs:`` (deb822) or ``deb`` line's URL."""
    for path in sources:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            found = re.match(r"\s*(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?(\S+)", line)
            if found and "security" not in found.group(1):
                return found.group(1)
    raise CheckError("no Debian mirror in /etc/apt/sources.list{,.d/debian.sources}")


def base_image(dockerfile: Path) -> str:
    """The base image the Dockerfile names (``ARG PYTHON_IMAGE=...``), fully qualified."""
    found = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile.read_text(), re.MULTILINE)
    if found is None:
        raise CheckError(f"{dockerfile} has no ARG PYTHON_IMAGE=")
    name = found.group(1)
    return name if "/" in name else f"docker.io/library/{name}"


def standin_containerfile(base: str, certs: Sequence[str]) -> str:
    """The stand-in for the official Python image, on the imported Debian ``base``."""
    copy = "".join(f"COPY {c} /usr/local/share/ca-certificates/{c}\n" for c in certs)
    return (
        f"FROM {base}\n{copy}"
        "RUN apt-get update && apt-get install -y --no-install-recommends python3 "
        "python3-venv python3-pip python3-dev ca-certificates "
        "&& update-ca-certificates && rm -rf /var/lib/apt/lists/* "
        "&& ln -s /usr/bin/python3 /usr/local/bin/python "
        "&& ln -s /usr/bin/pip3 /usr/local/bin/pip\n"
        # Debian marks its Python externally managed; the official image does not.
        "ENV PIP_BREAK_SYSTEM_PACKAGES=1\n"
        'CMD ["python3"]\n'
    )


class Say:
    """Progress lines on stdout, with the seconds since the check started."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, text: str) -> None:
        print(f"[{time.monotonic() - self.start:7.1f}s] {text}", flush=True)


@dataclass
class Engine:
    """podman and buildah aimed at the storage under ``workdir``."""

    workdir: Path
    say: Say
    timings: dict[str, float] = field(default_factory=dict)
    native: bool = field(init=False, default=False)
    """Storage on the kernel's overlay (:func:`kernel_overlay`), not fuse-overlayfs."""

    def __post_init__(self) -> None:
        self.workdir = self.workdir.resolve()
        storage = self.workdir / "storage"
        (storage / "graph").mkdir(parents=True, exist_ok=True)
        (storage / "run").mkdir(parents=True, exist_ok=True)
        (storage / "tmp").mkdir(parents=True, exist_ok=True)
        self.storage_conf = self.workdir / "storage.conf"
        self.native = kernel_overlay(self.workdir)
        fuse = "" if self.native else 'mount_program = "/usr/bin/fuse-overlayfs"\n'
        self.storage_conf.write_text(
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{storage / "graph"}"\n'
            f'runroot = "{storage / "run"}"\n'
            f"[storage.options.overlay]\n{fuse}"
        )
        self.containers_conf = self.workdir / "containers.conf"
        ulimits = ", ".join(f'"{u}"' for u in ULIMITS)
        self.containers_conf.write_text(
            "[containers]\n"
            f"default_ulimits = [{ulimits}]\n"
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
            f'tmp_dir = "{storage / "tmp"}"\n'
        )

    @property
    def env(self) -> dict[str, str]:
        """The environment every podman or buildah call runs with."""
        return {
            **os.environ,
            "CONTAINERS_STORAGE_CONF": str(self.storage_conf),
            "CONTAINERS_CONF": str(self.containers_conf),
            "BUILDAH_ISOLATION": "chroot",
        }

    def run(
        self,
        tool: str,
        *args: str,
        check: bool = True,
        quiet: bool = False,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run podman or buildah; a failure raises with the command and its output tail."""
        argv = [tool, *args]
        done = subprocess.run(
            argv,
            env={**self.env, **(env or {})},
            capture_output=quiet,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            tail = ((done.stdout or "") + (done.stderr or ""))[-3000:]
            raise CheckError(f"`{' '.join(argv[:6])} ...` exited {done.returncode}\n{tail}")
        return done

    def podman(self, *args: str, check: bool = True) -> str:
        """``podman ARGS``; its stdout."""
        return self.run("podman", *args, check=check, quiet=True).stdout.strip()

    def save_logs(self, names: Sequence[str], folder: Path) -> None:
        """Each container's output (stdout and stderr) to ``folder/NAME.log``."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            out = self.run("podman", "logs", name, check=False, quiet=True)
            (folder / f"{name}.log").write_text((out.stdout or "") + (out.stderr or ""))

    def exists(self, image: str) -> bool:
        """Whether ``image`` is in this storage."""
        return self.run("podman", "image", "exists", image, check=False, quiet=True).returncode == 0

    def size_mb(self, image: str) -> float:
        """The image's size in MB as podman counts it (all layers, uncompressed)."""
        return int(self.podman("image", "inspect", "--format", "{{.Size}}", image)) / 1e6

    def standin(self, name: str) -> None:
        """Make ``name`` (the Dockerfile's base) from Debian, unless it exists already."""
        if self.exists(name):
            self.say(f"stand-in base {name} already in the work folder's storage")
            return
        started = time.monotonic()
        debian = f"localhost/{SUITE}-minbase:latest"
        if not self.exists(debian):
            self._import_debian(debian)
        with tempfile.TemporaryDirectory(dir=self.workdir) as context:
            certs = sorted(p.name for p in LOCAL_CERTS.glob("*.crt"))
            for cert in certs:
                shutil.copy(LOCAL_CERTS / cert, Path(context, cert))
            Path(context, "Containerfile").write_text(standin_containerfile(debian, certs))
            self.run(
                *BUD,
                "-t",
                name,
                "-f",
                str(Path(context, "Containerfile")),
                context,
                quiet=True,
            )
        self.timings["stand-in base"] = time.monotonic() - started
        self.say(f"stand-in base {name} built in {self.timings['stand-in base']:.0f} s")

    def _import_debian(self, tag: str) -> None:
        mirror = apt_mirror()
        rootfs = self.workdir / "rootfs"
        if rootfs.exists():
            shutil.rmtree(rootfs)
        self.say(f"debootstrap --variant=minbase {SUITE} from the machine's apt mirror")
        subprocess.run(
            ["debootstrap", "--variant=minbase", SUITE, str(rootfs), mirror],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            done = subprocess.run(
                ["podman", "import", "-", tag],
                stdin=tar.stdout,
                env=self.env,
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()
        if done.returncode != 0:
            raise CheckError(f"podman import failed:\n{done.stderr[-2000:]}")
        shutil.rmtree(rootfs)

    def release(self) -> list[str]:
        """Remove buildah's working containers (a multi-stage build leaves some, mounted
        through fuse-overlayfs) and unmount the storage. Returns the processes still
        running from this storage afterwards (none, unless something is stuck)."""
        self.run("buildah", "rm", "--all", check=False, quiet=True)
        self.run("podman", "rm", "--all", "--force", check=False, quiet=True)
        overlay = self.workdir / "storage" / "graph" / "overlay"
        if os.path.ismount(overlay):
            subprocess.run(["umount", str(overlay)], check=False)
        return processes_using(self.workdir / "storage")

    def build(self, context: Path, target: str, tag: str, *build_args: str) -> float:
        """``buildah bud`` one target of the Dockerfile; its wall time in seconds.

        Stages that do not depend on each other build at once (``--jobs``): one
        stage's downloads and package installs overlap another's compiling. Safe to
        call from several threads: the storage is locked by the tools themselves."""
        started = time.monotonic()
        args = [a for b in build_args for a in ("--build-arg", b)]
        self.run(
            *BUD,
            "--layers",
            "--force-rm",
            "--jobs",
            str(STAGE_JOBS),
            "--target",
            target,
            *args,
            "-t",
            tag,
            str(context),
            quiet=True,
        )
        took = time.monotonic() - started
        self.timings[target] = took
        return took
