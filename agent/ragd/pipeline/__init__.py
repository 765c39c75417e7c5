"""The pipeline: one directory's files from disk to sidecars and a change note.

scan (what is there) -> dirjob (one directory, under its lock) -> filejob (one file) -> parse -> split -> embed ->
sidecar (the `.ragjson` entries) and mushroom (the change note the index writer applies). Nothing here knows about
the index, the watcher or the agent.
"""
