"""Over the index: the search service (`search`) and the retrieval metrics of `ragd eval` (`evaluate`)."""
