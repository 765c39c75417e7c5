"""The hybrid ranking every backend's query runs: the dense and keyword lists fused by document (`hybrid`,
`fusion`)."""
