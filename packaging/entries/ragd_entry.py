"""Frozen entry point of `ragd` (PyInstaller runs this file as a script, so it imports the package absolutely).

`ragd --ragd-index-probe DIR` is the child process that tries a damaged-looking index before the agent opens it
(a frozen program has no interpreter to run `python -m ragd.index.zvec.probe`); `ragd --ragd-ocr-probe` tries whether
the OCR engine imports (ragd/pipeline/parse/ocr_probe.py). `freeze_support()` comes first: the fork
server the workers are forked from (ragd/pipeline/pool.py) and multiprocessing's resource tracker are this program
started again with multiprocessing's arguments, and must run those, not the agent (PyInstaller's hook recognises
them).
"""

import multiprocessing
import sys

from ragd.edges.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    if sys.argv[1:2] == ["--ragd-index-probe"]:
        from ragd.index.zvec.probe import main as probe_main

        sys.exit(probe_main(sys.argv[2:]))
    if sys.argv[1:2] == ["--ragd-ocr-probe"]:
        from ragd.pipeline.parse.ocr_probe import main as ocr_probe_main

        sys.exit(ocr_probe_main())
    sys.exit(main())
