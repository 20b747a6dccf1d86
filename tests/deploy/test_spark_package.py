"""The Spark jobs' zip (``make spark-package``) works on its own: a cluster that has
the jobs' dependencies but not this project (EMR with a bootstrap action, docs/
sparkjobs.md) imports every job from the zip alone.

The zip used to carry ``consumer/config.py`` but not what it imported (the lease keys,
the landing protection settings), so ``import sparkjobs.cli`` failed there; every test
of the jobs ran beside the installed project and never noticed.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys
sys.path[:0] = [{zip!r}]
sys.path += {site!r}
import consumer, sparkjobs.cli, sparkjobs.settings
from consumer.config import known_variables
assert consumer.__file__.startswith({zip!r}), consumer.__file__
assert "LANDER_FAILOVER_SECONDS" in known_variables()  # the workers' too: one environment
try:
    sparkjobs.cli.main(["compact", "--help"])
except SystemExit as done:
    assert done.code == 0, done.code
print("imported", len([m for m in sys.modules if m.startswith("consumer")]))
"""


@pytest.mark.processes
def test_the_jobs_import_from_the_zip_alone(tmp_path: Path) -> None:
    target = tmp_path / "jobs.zip"
    subprocess.run([sys.executable, "deploy/spark/package.py", str(target)], cwd=REPO, check=True)
    names = zipfile.ZipFile(target).namelist()
    assert "sparkjobs/cli.py" in names
    assert "consumer/config/shared.py" in names
    assert not any(name.startswith("consumer/cli/") for name in names)
    assert "consumer/leases/coordinator.py" not in names
    site = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    # -S: no site-packages processing, so the editable install's finder is not loaded
    # and `consumer` can only come from the zip; the dependencies' folders are added.
    done = subprocess.run(
        [sys.executable, "-S", "-c", PROBE.format(zip=str(target), site=site)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1].startswith("imported")
