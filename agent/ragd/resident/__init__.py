"""The resident agent: what keeps running between changes.

watcher -> debounce -> scheduler -> the pipeline's directory jobs, recorded by tracker; agent wires them to the
index writer; instance (one agent per data dir, the control socket), notify (systemd), rootstate (roots added by
`ragctl`), once (`ragd run --once`).
"""
