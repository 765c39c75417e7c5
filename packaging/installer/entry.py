"""Frozen entry point of `ragd-installer` (PyInstaller runs this file as a script)."""

import sys

from ragd_installer.cli import main

if __name__ == "__main__":
    sys.exit(main())
