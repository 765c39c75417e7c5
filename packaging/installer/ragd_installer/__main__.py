"""`python -m ragd_installer` is the `ragd-installer` command."""

import sys

from ragd_installer.cli import main

sys.exit(main())
