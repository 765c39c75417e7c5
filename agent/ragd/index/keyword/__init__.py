"""The keyword engine: how text is cut into words (`words`) and turned into search terms (`fts`), the tantivy
keyword index beside a zvec collection (`keywords`), and the English glosses of a Chinese question (`lexicon`)."""
