"""The file ``spark-submit`` runs: ``spark-submit … submit.py compact|analyse [flags]``.

Ship the project's code with ``--py-files lander-jobs.zip`` (``make spark-package``) and
its dependencies (structlog, pydantic-settings) with the cluster's Python environment:
see docs/sparkjobs.md.
"""

import sys

from sparkjobs.cli import main

if __name__ == "__main__":
    sys.exit(main())
