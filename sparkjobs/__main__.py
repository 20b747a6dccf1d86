"""``python -m sparkjobs compact|analyse …``."""

import sys

from sparkjobs.cli import main

sys.exit(main())
