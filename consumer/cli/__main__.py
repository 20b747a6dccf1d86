"""``python -m consumer.cli``: the ``lander`` command."""

import sys

from consumer.cli import main

sys.exit(main())
