"""Build the desktop-help development set from pinned Debian packages (bench/devset_desktop/README.md).

    python -m bench.devset_desktop.build OUT [--debs DIR] [--check]

Downloads each pinned package with `apt-get download` into DIR (default OUT/../debs; a file already there with
the right sha256 is reused), checks its sha256, reads the Mallard help pages straight out of the .deb (English
`help/C/`, Chinese `help/zh_CN/`) and writes each as Markdown (bench/devset_desktop/mallard.py):
`en/gnome-help/files-hidden.md`, `zh/gedit/gedit-search.md`. Which pages are kept is decided by fixed rules
(below), so the same packages give the same corpus: OUT/../manifest.json lists every file's sha256, `--check`
fails unless a fresh build equals the committed bench/devset_desktop/manifest.json.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.devset.build import committed_set_main, deb_members, fetch, write_corpus
from bench.devset_desktop import mallard

HERE = Path(__file__).parent
# package, version, sha256 of the .deb (Debian 12 "bookworm", amd64 / all)
PINS: tuple[tuple[str, str, str], ...] = (
    ("gnome-user-docs", "43.0-2", "0d635a840747958ca84da778b40d341f1155603851f922c9a171f5a181d6a39f"),
    ("gedit-common", "44.2-1", "3d9446b4ddcc7db0df41d9ee7f71b60a1d29ad688b6acbe04fe6fbea3461d5ef"),
    ("evince-common", "43.1-2+deb12u1", "777ea7d094db2acd7b385e272b0ba6cf03c7e45d574e6f2c689b507de3d95dbb"),
    ("cheese-common", "43.0-1", "851b3595fcb7b5dbba1c646bfddd64a56907302e0b85db4c38dda1aa2336bfbb"),
    ("brasero-common", "3.12.3-2", "567f50e06ced514710ba95200686e39ce4eef89623b72775de87ac0f5677e0ab"),
    ("zenity-common", "3.44.0-1", "aa1ed5d687a6ec6563103e3005cc9329c39ca76f86154a7b5e9bbc5ba94f40ae"),
    ("gnome-dictionary", "40.0-3", "428344ad24333010f81c3d6c9a6d77566cc12858603637551b38e622c8223f9d"),
)
DOCS = ("gnome-help", "gedit", "evince", "cheese", "brasero", "zenity", "gnome-dictionary")
PAGE = re.compile(r"usr/share/help/(C|zh_CN)/([a-z-]+)/([A-Za-z0-9_.-]+)\.page$")
LANGS = {"C": "en", "zh_CN": "zh"}
# Pages kept in Chinese only (their English page left out), so that an English question has only a Chinese
# answer: well-translated pages (at least 4/5 of their paragraphs in Chinese).
ZH_ONLY = frozenset(
    {
        "gnome-help/" + p
        for p in (
            "backup-frequency", "backup-restore", "backup-what", "color-whatisspace", "color-why-calibrate",
            "files-removedrive", "hardware-problems-graphics", "mouse-problem-notmoving",
            "nautilus-file-properties-basic", "power-batteryslow", "power-batterywindows", "power-constantfan",
            "printing-booklet", "sound-broken",
        )
    }
    | {"gedit/" + p for p in ("gedit-edit-as-root", "gedit-plugins-sort", "gedit-printing-select",
                             "gedit-spellcheck", "gedit-undo-redo")}
    | {"cheese/" + p for p in ("burst-mode", "pref-countdown", "video-record")}
    | {"zenity/" + p for p in ("calendar", "password", "scale")}
    | {"gnome-dictionary/" + p for p in ("print", "similar-words")}
    | {"brasero/" + p for p in ("split-track", "tools-blank")}
)  # fmt: skip
ZH_SHARE = 0.5  # a Chinese page is kept when at least this share of its paragraphs is in Chinese
_HAN = re.compile(r"[\u4e00-\u9fff]")


def chinese_share(root: ET.Element) -> float:
    """The share of a page's paragraphs that hold Chinese: the translation's coverage (a partly translated
    page keeps the untranslated paragraphs in English; an untranslated one is a link to the English page)."""
    paras = [t for p in root.iter(f"{mallard.NS}p") if (t := "".join(p.itertext()).strip())]
    return sum(1 for p in paras if _HAN.search(p)) / len(paras) if paras else 0.0


def read(debs: dict[str, Path]) -> dict[tuple[str, str, str], ET.Element]:
    """(lang, doc, page id) -> parsed page, of every regular page file in the packages (a symbolic link in
    help/zh_CN is an untranslated page: Debian links it to the English one)."""
    pages: dict[tuple[str, str, str], ET.Element] = {}
    for package, _, _ in PINS:
        for name, data in deb_members(debs[package]):
            m = PAGE.search(name)
            if m and m.group(2) in DOCS:
                pages[(LANGS[m.group(1)], m.group(2), m.group(3))] = ET.fromstring(data)
    return pages


def kept(key: tuple[str, str, str], root: ET.Element) -> bool:
    lang, doc, page = key
    if lang == "en":
        return f"{doc}/{page}" not in ZH_ONLY
    return chinese_share(root) >= ZH_SHARE


def build(out: Path, debs_dir: Path) -> dict[str, str]:
    debs = {pkg: fetch(debs_dir, pkg, ver, sha) for pkg, ver, sha in PINS}
    pages = read(debs)
    titles: dict[tuple[str, str], dict[str, str]] = {}
    for (lang, doc, page), root in sorted(pages.items()):  # link text: the target's title, English if need be
        titles.setdefault((lang, doc), {})[page] = mallard.page_title(root)
    for (lang, doc), table in titles.items():
        if lang != "en":
            titles[(lang, doc)] = {**titles.get(("en", doc), {}), **table}
    return write_corpus(
        out,
        (
            (f"{lang}/{doc}/{page}.md", mallard.to_markdown(root, titles[(lang, doc)]).encode())
            for (lang, doc, page), root in sorted(pages.items())
            if kept((lang, doc, page), root)
        ),
    )


def main(argv: list[str] | None = None) -> int:
    return committed_set_main(argv, __doc__ or "", PINS, build, HERE)


if __name__ == "__main__":
    raise SystemExit(main())
