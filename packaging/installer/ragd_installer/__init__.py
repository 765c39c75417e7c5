"""ragd-installer: installs the frozen ragd program (user or system), its systemd unit and a default config.

The logic lives here as plain Python (standard library + `ragd.errors`), importable and testable without
PyInstaller; packaging/installer.spec freezes it into one file that carries the program as a tar archive.
"""

from ragd import __version__

__all__ = ["__version__"]
