"""IndexBackend on Milvus (a server or cluster shared by many agents, or Milvus Lite): docs/scale-out.md.

gRPC's fork support is turned off before pymilvus imports grpc: the agent forks only to exec (its worker
processes, OCR's probe, soffice), and grpc 1.8x's handler in the forked child aborted it before the exec when a
call was under way ("epoll_wait error: Bad file descriptor", grpc/grpc#43055), so a worker started while the agent
talked to its Milvus server could die at birth. A user's own GRPC_ENABLE_FORK_SUPPORT is kept.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
