"""The `.rag/` sidecar store (RAG-Storage-Spec v2.4), interoperable with the ragjson tool.

Layout beside each tracked directory D:
    D/.rag/<file>.ragjson           file entry
    D/.rag/<subdir>.ragjson         directory entry: exactly {"ragjson_version": "2.4"}
    D/.rag/<name>.ragjson.deleted   entry of a deleted source (renamed back if it returns)
    D/.rag/tmp/                     staging for atomic writes; its fd is the flock(2) target for D
    D/.rag/*.mushroom               pending change notes for the index (see pipeline/mushroom.py)
    D/.rag/.gitignore               `*`: the store never shows in `git status` (written when missing)

Every write is tmp + fsync + rename() under the directory's lock (see DirLock). A store left with nothing but deleted
entries in a folder that holds nothing else is removed (`drop_emptied`). An entry is never more readable than
its source, `.rag/` never more open than its directory, `.rag/tmp/` is 0700, and names that are not valid UTF-8 are
never written (see modes.py).

In parts: `entry` (the format), `files` (the layout, reading and writing entries), `lock` (the directory's lock,
the store made and removed), `queries` (what a store holds); this module re-exports them.
"""

from .entry import (
    CHUNK_META_KEYS,
    DIR_ENTRY,
    VERSION,
    FileEntry,
    SourceInfo,
    StoredChunk,
    StoredLead,
    decode_vector,
    dumps,
    encode_vector,
    entry_from_json,
    parse_stamp,
    utc_stamp,
)
from .files import (
    DELETED_SUFFIX,
    ENTRY_SUFFIX,
    GITIGNORE,
    GITIGNORE_TEXT,
    RAG_DIR,
    TMP_DIR,
    entry_path,
    mark_deleted,
    parse_entry,
    rag_dir,
    read_entry,
    recover,
    try_read,
    unreadable,
    write_atomic,
    write_dir_entry,
    write_entry,
)
from .lock import (
    LOCK_ATTEMPTS,
    DirLock,
    StoreId,
    clean_debris,
    drop_emptied,
    keep_out_of_git,
    store_id,
)
from .queries import (
    LEAD_KEY,
    Entries,
    EntryName,
    list_entries,
    load_entries,
    vectors_by_hash,
)

__all__ = [
    "CHUNK_META_KEYS",
    "DELETED_SUFFIX",
    "DIR_ENTRY",
    "ENTRY_SUFFIX",
    "GITIGNORE",
    "GITIGNORE_TEXT",
    "LEAD_KEY",
    "LOCK_ATTEMPTS",
    "RAG_DIR",
    "TMP_DIR",
    "VERSION",
    "DirLock",
    "Entries",
    "EntryName",
    "FileEntry",
    "SourceInfo",
    "StoreId",
    "StoredChunk",
    "StoredLead",
    "clean_debris",
    "decode_vector",
    "drop_emptied",
    "dumps",
    "encode_vector",
    "entry_from_json",
    "entry_path",
    "keep_out_of_git",
    "list_entries",
    "load_entries",
    "mark_deleted",
    "parse_entry",
    "parse_stamp",
    "rag_dir",
    "read_entry",
    "recover",
    "store_id",
    "try_read",
    "unreadable",
    "utc_stamp",
    "vectors_by_hash",
    "write_atomic",
    "write_dir_entry",
    "write_entry",
]
