"""The write side: the index writer thread (`writer`), applying change notes and reconciling with the sidecars
(`sync`), and self-verification (`verify`, with its memory of the sidecar entries: `entrycache`)."""
