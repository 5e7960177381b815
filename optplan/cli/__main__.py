"""``python -m optplan.cli``: the ``optplan`` command."""

import sys

from . import main

sys.exit(main())
