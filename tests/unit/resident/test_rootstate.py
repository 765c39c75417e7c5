from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from ragd.errors import ConfigError
from ragd.resident import rootstate


def test_the_overlay_applies_over_the_configured_roots_and_survives_a_save(tmp_path: Path) -> None:
    overlay = rootstate.RootOverlay()
    overlay.add(Path("/kb/new"))
    overlay.remove(Path("/kb/old"), configured=True)
    rootstate.save(tmp_path, overlay)
    again = rootstate.load(tmp_path)
    assert again.apply([Path("/kb/old"), Path("/kb/kept")]) == [Path("/kb/kept"), Path("/kb/new")]


def test_a_damaged_overlay_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / rootstate.FILE_NAME).write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        rootstate.load(tmp_path)
    assert rootstate.FILE_NAME in err.value.message


def test_the_roots_served_round_trip_with_odd_names(tmp_path: Path) -> None:
    assert rootstate.load_served(tmp_path, "/data/index") is None  # no record: a new data directory
    roots = [Path("/kb/笔记"), Path('/kb/a "b" %_'), Path("/kb/line\nbreak")]
    rootstate.save_served(tmp_path / "new-dir", "/data/index", roots)
    assert rootstate.load_served(tmp_path / "new-dir", "/data/index") == rootstate.Served(roots, filled=True)
    rootstate.save_served(tmp_path, "/data/index", [])
    served = rootstate.load_served(tmp_path, "/data/index")  # none served: every root is new at a start
    assert served == rootstate.Served([], filled=True)


def test_a_fill_under_way_is_recorded_as_not_filled(tmp_path: Path) -> None:
    """Recorded before a fill of the index from the sidecars, and kept if the agent is killed during it: the next
    start fills the index again."""
    rootstate.save_served(tmp_path, "/data/index", [Path("/kb")], filled=False)
    assert rootstate.load_served(tmp_path, "/data/index") == rootstate.Served([Path("/kb")], filled=False)


def test_a_record_of_an_older_version_is_not_taken_as_filled(tmp_path: Path) -> None:
    """An older version wrote the record before its fill was done."""
    record = '{"index": "/data/index", "roots": ["/kb"]}'
    (tmp_path / rootstate.SERVED_FILE).write_text(record, encoding="utf-8")
    assert rootstate.load_served(tmp_path, "/data/index") == rootstate.Served([Path("/kb")], filled=False)


def test_the_roots_served_by_another_index_are_no_record(tmp_path: Path) -> None:
    """Another embedding model or backend: another index, whose roots this record does not describe."""
    rootstate.save_served(tmp_path, "/data/index-model-a", [Path("/kb")])
    assert rootstate.load_served(tmp_path, "/data/index-model-b") is None


@pytest.mark.parametrize(
    "text", ["{", "[]", '{"roots": "/kb"}', '{"roots": ["relative/dir"]}', '{"roots": [1]}']
)
def test_a_damaged_record_of_the_roots_served_is_no_record(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The record is the agent's own; damaged, the index is filled again from the sidecars (as with no record),
    and the agent still starts."""
    (tmp_path / rootstate.SERVED_FILE).write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ragd.resident.rootstate"):
        assert rootstate.load_served(tmp_path, "/data/index") is None
    assert rootstate.SERVED_FILE in caplog.text and "filled again" in caplog.text


def test_the_kept_roots_survive_their_file_deleted_at_any_moment(tmp_path: Path) -> None:
    """The data directory deleted under the agent (roots.json with it) while `roots add|remove` run and the main
    loop writes the file back: no read may see "no roots.json, so nothing was ever added" and lose the copy (the
    model-based test once found a removed root back after roots.json was deleted while the agent ran)."""
    kept = rootstate.KeptRoots(tmp_path)
    kept.change(lambda o: o.remove(Path("/kb/configured"), configured=True))
    kept.change(lambda o: o.add(Path("/kb/added")))
    stop = threading.Event()

    def delete_and_write_back() -> None:
        while not stop.is_set():
            (tmp_path / rootstate.FILE_NAME).unlink(missing_ok=True)
            kept.write_back()

    thread = threading.Thread(target=delete_and_write_back)
    thread.start()
    try:
        for i in range(2000):
            seen = kept.current()
            assert seen.removed == [Path("/kb/configured")] and Path("/kb/added") in seen.added, (i, seen)
            if i % 100 == 0:  # a change in the middle of it all is kept too
                kept.change(lambda o, n=i: o.add(Path(f"/kb/more{n}")))
    finally:
        stop.set()
        thread.join()
    kept.write_back()
    assert Path("/kb/more1900") in rootstate.load(tmp_path).added
    assert kept.any() and not rootstate.KeptRoots(tmp_path / "new").any()


def test_roots_entering_round_trip_and_an_older_record_has_none(tmp_path: Path) -> None:
    rootstate.save_served(tmp_path, "/data/index", [Path("/kb")], entering=[Path("/new 笔记")])
    served = rootstate.load_served(tmp_path, "/data/index")
    assert served == rootstate.Served([Path("/kb")], filled=True, entering=[Path("/new 笔记")])
    record = '{"index": "/data/index", "roots": ["/kb"], "filled": true, "entering": ["relative", 3]}'
    (tmp_path / rootstate.SERVED_FILE).write_text(record, encoding="utf-8")
    assert rootstate.load_served(tmp_path, "/data/index") == rootstate.Served([Path("/kb")], filled=True)
