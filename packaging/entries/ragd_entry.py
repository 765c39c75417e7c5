"""Frozen entry point of `ragd` (PyInstaller runs this file as a script, so it imports the package absolutely)."""

import sys

from ragd.cli import main

if __name__ == "__main__":
    sys.exit(main())
