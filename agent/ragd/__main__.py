"""`python -m ragd` is the `ragd` command."""

import sys

from .edges.cli import main

sys.exit(main())
