"""IndexBackend on an embedded zvec collection (the default), with the checks that keep a damaged collection from
crashing the process (`health`, `probe`) and its tantivy keyword index beside it (keyword/keywords.py)."""
