"""`python -m ragd` is the `ragd` command."""

import sys

from .cli import main

sys.exit(main())
