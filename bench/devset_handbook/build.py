"""Build the administrator's-book development set from a pinned Debian package (bench/devset_handbook/README.md).

    python -m bench.devset_handbook.build OUT [--debs DIR] [--check]

Downloads `debian-handbook` with `apt-get download` into DIR (default OUT/../debs; a file already there with the
right sha256 is reused), checks its sha256 and copies the book's HTML pages, one per section, straight out of the
.deb: `en/sect.backup.html`, `zh/sect.backup.html`. Which pages are kept is decided by fixed rules (below), so the
same package gives the same corpus: OUT/../manifest.json lists every file's sha256, `--check` fails unless a fresh
build equals the committed bench/devset_handbook/manifest.json.
"""

from __future__ import annotations

import re
from pathlib import Path

from bench.devset.build import committed_set_main, deb_members, fetch, write_corpus

HERE = Path(__file__).parent
PINS: tuple[tuple[str, str, str], ...] = (
    ("debian-handbook", "11.20220922", "3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa"),
)
PAGE = re.compile(r"usr/share/doc/debian-handbook/html/(en-US|zh-CN)/([a-z0-9.-]+\.html)$")
LANGS = {"en-US": "en", "zh-CN": "zh"}
SKIP = {"index.html"}  # the book's full table of contents: it names every section and answers none
# Sections kept in Chinese only (their English page left out), so that an English question has only a Chinese
# answer: well-translated sections (at least 3/4 of their paragraphs in Chinese).
ZH_ONLY = frozenset(
    f"sect.{s}.html"
    for s in (
        "after-first-boot", "apt-file", "asynchronous-task-scheduling-anacron", "automatic-upgrades", "backup",
        "creating-accounts", "follow-debian-news", "hostname-name-service", "hotplug", "ldap-directory",
        "nfs-file-server", "quotas", "regular-upgrades", "searching-packages", "setup-apt-package-repository",
        "syslog", "windows-emulation", "windows-file-server-with-samba",
    )
)  # fmt: skip
ZH_SHARE = 0.5  # a Chinese page is kept when at least this share of its paragraphs is in Chinese
_PARA = re.compile(r'<div class="para">(.*?)</div>', re.S)
_TAG = re.compile(r"<[^>]+>")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def chinese_share(html: str) -> float:
    """The share of a page's paragraphs (over 30 characters of text) that hold Chinese: the translation's coverage
    (the zh-CN book falls back to English paragraph by paragraph where it is not translated)."""
    paras = [t for p in _PARA.findall(html) if len(t := _TAG.sub("", p).strip()) > 30]
    return sum(1 for p in paras if _HAN.search(p)) / len(paras) if paras else 0.0


def select(deb: Path) -> dict[str, bytes]:
    """corpus path -> bytes of every page kept."""
    pages: dict[str, bytes] = {}
    for name, data in deb_members(deb):
        m = PAGE.search(name)
        if not m or m.group(2) in SKIP:
            continue
        lang, page = LANGS[m.group(1)], m.group(2)
        if lang == "en" and page in ZH_ONLY:
            continue
        if lang == "zh" and chinese_share(data.decode("utf-8")) < ZH_SHARE:
            continue
        pages[f"{lang}/{page}"] = data
    return dict(sorted(pages.items()))


def build(out: Path, debs_dir: Path) -> dict[str, str]:
    (deb,) = (fetch(debs_dir, pkg, ver, sha) for pkg, ver, sha in PINS)
    pages = select(deb)
    return write_corpus(out, pages.items())


def main(argv: list[str] | None = None) -> int:
    return committed_set_main(argv, __doc__ or "", PINS, build, HERE)


if __name__ == "__main__":
    raise SystemExit(main())
