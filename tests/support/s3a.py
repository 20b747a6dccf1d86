"""The S3A connector jars for the s3a:// tests, and the Spark settings that make them work.

PySpark ships Hadoop's client but not ``hadoop-aws`` (the S3A filesystem) nor the AWS
SDK it needs, and this project does not reach Maven. The sdist of
``sagemaker-pyspark==1.4.5`` on PyPI carries both (``hadoop-aws-3.3.1.jar``,
``aws-java-sdk-bundle-1.11.901.jar``): :func:`fetch_jars` downloads it with pip and
keeps just those two jars in ``.cache/s3a-jars/`` at the repository root.

``python -m tests.support.s3a`` (``make s3a-jars``) fetches them and prints where they
are; ``LANDER_S3A_JARS`` may name another folder that holds them.

The versions do not match: hadoop-aws 3.3.1 runs against PySpark's Hadoop 3.5 client,
whose ``core-default.xml`` gives some ``fs.s3a.*`` durations with units (``60s``,
``24h``) that 3.3.1 reads as plain numbers, and names an AWS SDK v2 credential provider
3.3.1 cannot load. :func:`spark_submit_args` overrides exactly those
(:data:`COMPAT_OVERRIDES`). The sizes with units (``fs.s3a.multipart.size`` ``64M``,
``fs.s3a.block.size`` ``32M``, ``fs.s3a.readahead.range`` ``64K``) needed no override in
the trials: 3.3.1 reads them with ``getLongBytes``. Good enough to run the jobs against
the embedded moto S3 in the tests; never for production.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JARS_DIR = REPO / ".cache" / "s3a-jars"
ENV_VAR = "LANDER_S3A_JARS"
SOURCE = "sagemaker-pyspark==1.4.5"
JAR_NAMES = ("hadoop-aws-3.3.1.jar", "aws-java-sdk-bundle-1.11.901.jar")
DUMMY_CREDENTIAL = "lander-local"

# Hadoop 3.5's core-default.xml values that hadoop-aws 3.3.1 cannot parse or load, each
# replaced by the same value in the form 3.3.1 expects. Found by trial: without any one of
# them creating an S3A filesystem fails with the error its comment names.
COMPAT_OVERRIDES: dict[str, str] = {
    # 3.3.1 reads these with Configuration.getInt / getLong, in milliseconds: "200s",
    # "30s" fail with NumberFormatException when the filesystem is created.
    "fs.s3a.connection.timeout": "200000",
    "fs.s3a.connection.establish.timeout": "30000",
    # getLong, in seconds: "60s" fails when the S3A thread pool is built.
    "fs.s3a.threads.keepalivetime": "60",
    # getLong, in seconds: "24h" fails in initialize() (read even with purge disabled).
    "fs.s3a.multipart.purge.age": "86400",
    # The 3.5 default chain names software.amazon.awssdk (SDK v2) classes; 3.3.1 bundles
    # SDK v1 and fails with ClassNotFoundException on them. Keys come from fs.s3a.*.key.
    "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
}


def _candidates() -> list[Path]:
    folders = [JARS_DIR]
    named = os.environ.get(ENV_VAR)
    if named:
        folders.insert(0, Path(named).expanduser())
    return folders


def find_jars() -> list[Path] | None:
    """Both jars, from ``$LANDER_S3A_JARS`` or ``.cache/s3a-jars/``; None if either lacks one."""
    for folder in _candidates():
        # Absolute: Spark resolves --jars against the working folder of its process.
        jars = [(folder / name).resolve() for name in JAR_NAMES]
        if all(jar.is_file() for jar in jars):
            return jars
    return None


def fetch_jars(force: bool = False) -> list[Path]:
    """Download the sagemaker-pyspark sdist with pip and keep the two jars in JARS_DIR.

    Does nothing when both are already there (unless ``force``). Each jar is written
    beside its final name and renamed, so an interrupted fetch leaves no partial jar.
    """
    if not force:
        found = [JARS_DIR / name for name in JAR_NAMES]
        if all(jar.is_file() for jar in found):
            return found
    JARS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lander-s3a-") as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                SOURCE,
                "--no-deps",
                "--no-binary",
                ":all:",
                "--disable-pip-version-check",
                "-d",
                tmp,
            ],
            check=True,
        )
        archives = sorted(Path(tmp).glob("*.tar.gz"))
        if len(archives) != 1:
            raise RuntimeError(f"pip download {SOURCE}: expected one sdist, got {archives}")
        _extract(archives[0], JARS_DIR)
    return [JARS_DIR / name for name in JAR_NAMES]


def _extract(sdist: Path, folder: Path) -> None:
    """Copy the members of ``sdist`` named like one of JAR_NAMES into ``folder``."""
    wanted = set(JAR_NAMES)
    with tarfile.open(sdist, "r:gz") as archive:
        for member in archive:
            name = member.name.rsplit("/", 1)[-1]
            if not member.isfile() or name not in wanted:
                continue
            source = archive.extractfile(member)
            if source is None:
                continue
            partial = folder / f".{name}.partial"
            with source, partial.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            partial.replace(folder / name)
            wanted.discard(name)
    if wanted:
        raise RuntimeError(f"{sdist.name} holds no {', '.join(sorted(wanted))}")


def s3a_settings(endpoint: str) -> dict[str, str]:
    """Hadoop settings that point S3A at an S3 emulator such as the embedded moto."""
    return {
        "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": endpoint,
        # moto serves buckets under the path, not as virtual hosts, and plain HTTP.
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": DUMMY_CREDENTIAL,
        "fs.s3a.secret.key": DUMMY_CREDENTIAL,
        # One emulator process serves every request under one lock: fail fast, not after
        # the default 7-20 retries, so a broken setting shows its error at once.
        "fs.s3a.attempts.maximum": "2",
        "fs.s3a.retry.limit": "2",
        **COMPAT_OVERRIDES,
    }


def spark_submit_args(
    jars: Sequence[Path], endpoint: str, extra: Mapping[str, str] | None = None
) -> str:
    """A ``PYSPARK_SUBMIT_ARGS`` value: the jars, the S3A settings, ``pyspark-shell``.

    ``extra`` adds Spark settings (``spark.*`` keys, given as they are).
    """
    args = ["--jars", ",".join(str(jar) for jar in jars)]
    for key, value in s3a_settings(endpoint).items():
        args += ["--conf", f"spark.hadoop.{key}={value}"]
    for key, value in (extra or {}).items():
        args += ["--conf", f"{key}={value}"]
    # pyspark splits the variable with shlex and needs the primary resource last.
    return shlex.join([*args, "pyspark-shell"])


def main() -> int:
    """Fetch the jars (if missing) and print where they are."""
    jars = fetch_jars()
    for jar in jars:
        print(f"{jar} ({jar.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
