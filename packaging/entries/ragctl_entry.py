"""Frozen entry point of `ragctl` (PyInstaller runs this file as a script, so it imports the package absolutely)."""

import sys

from ragctl.main import main

if __name__ == "__main__":
    sys.exit(main())
