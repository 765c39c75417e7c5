"""What the parse workers import as they start (their fork server imports it once for them all: pool.py), named
here in a module that imports nothing, so that `ragd run --once` can start the fork server before its own imports
(edges/cli.py): the server's ~0.8 s of imports then overlap the agent's instead of following them."""

PARSE = ("ragd.pipeline.parse", "ragd.pipeline.split", "langchain_text_splitters.character")
# the module of the workers' keyword cut for a zvec index (index/keyword's WORKER_CUT), whose import builds the
# Chinese dictionary
CUT_MODULE = "ragd.index.keyword.cutter"
