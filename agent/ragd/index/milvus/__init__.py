"""IndexBackend on Milvus (a server or cluster shared by many agents, or Milvus Lite): docs/scale-out.md."""
