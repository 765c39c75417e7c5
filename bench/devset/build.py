"""Build the retrieval development set's corpus from pinned Debian packages (bench/devset/README.md).

    python -m bench.devset.build OUT [--debs DIR]

Downloads each pinned package with `apt-get download` into DIR (default OUT/../debs; a file already there with
the right sha256 is reused), checks its sha256, reads the man pages and the Debian Reference straight out of the
.deb (ar + tar, no dpkg needed), and writes the corpus into OUT: man pages rendered by groff to Markdown
(`zh/man1/du.1.md`, `en/man1/du.1.md`), the Debian Reference's chapters kept as HTML
(`debian-reference/en/ch02.html`). Same packages and same groff: the same bytes (OUT/manifest.json lists
every file's sha256, and `--check` compares a fresh build against it).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# package, version, sha256 of the .deb (Debian 12 "bookworm", amd64 / all)
PINS: tuple[tuple[str, str, str], ...] = (
    ("manpages-zh", "1.6.4.0-1", "81bae29495f6445db290e3f329f1203eb19b651c2a7ea165b74ebdc853a32ac1"),
    ("manpages", "6.03-2", "efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91"),
    ("debian-reference-en", "2.100", "9f31d3a17df505de09689ca255512ea58c1fc47c59bb1b0c7bf1c23362e9743f"),
    ("debian-reference-zh-cn", "2.100", "6d2d8d9a646397e28b04cdff23d2e4374101ebf9be348e35961af62c8a2d0977"),
    ("coreutils", "9.1-1", "61038f857e346e8500adf53a2a0a20859f4d3a3b51570cc876b153a2d51a3091"),
    ("at", "3.2.5-1+b1", "45dfbf5a84ae390a97ade5a4f6c92fb1b7522c5cd2701bf4514b080eb5eabaab"),
    ("bzip2", "1.0.8-5+b1", "438871b3f5c5c7a357a9840951dab9dab8db7eb1ff760a563226fafa111b99e5"),
    ("cpio", "2.13+dfsg-7.1", "73d4a22bdd7eb6be1e480d6884b103eb500cfd539cc20ae0f3e44dd8b0614798"),
    ("cron", "3.0pl1-162", "c1e12d9c993460e6396107668aa7ba79f8633decebb53aa6c38049584448be3f"),
    ("diffutils", "1:3.8-4", "8bdfedc14c1035e3750e9f055ac9c1ecd9b5d05d9e6dc6466c4e9237eef407dd"),
    ("e2fsprogs", "1.47.0-2+b2", "fedd424691c08ef0739729026be298e7be8236337bf8e031b3c7ec66794e6fc2"),
    ("fdisk", "2.38.1-5+deb12u3", "a7bf5a6fee968c3bebeb37b13396ed195c59459e4631271bb3acac0d9cf42491"),
    ("file", "1:5.44-3", "2c57221bf8cc0ff5d2295ececb9215cc1b9ff9040dacb152c385bba3087ab1df"),
    ("findutils", "4.9.0-4", "5dd86bd0af4aa73f067dfd6b8339dd868f2dd84056aa79db29d1206d4fbc5e04"),
    ("grep", "3.8-5", "3264acea728df3c48a54f20e9291b965130e306b9d00adac76647049da7196df"),
    ("gzip", "1.12-1", "eabec1dde2834f72540d7b93fc5df2625f52611c06d93d61f5cdb12480e0e6a3"),
    ("hdparm", "9.65+ds-1", "a7264d99177008b7b50a53a0ede973352b930dcf7f99ecd775022a111bea8aba"),
    ("iptables", "1.8.9-2", "2928d3ca6ca8a3dc3f423f6752822b1f3614a5ba609ff7806bcba4449ffe90e1"),
    (
        "iputils-ping",
        "3:20221126-1+deb12u1",
        "5a206d74e2147990e08b89d09a4655e59a17222e0513a309a48e16ed2281589b",
    ),
    ("kbd", "2.5.1-1+b1", "5397ddbc7a6cadae6535de5a6d550c8554d4d364997527a34576c76219f4a798"),
    ("mount", "2.38.1-5+deb12u3", "456ed2c62f884bc1133b6969d4d1eb2e6d8581076b00b4c8d700151155270a7a"),
    ("net-tools", "2.10-0.1+deb12u2", "724ae901a4fa3f8ad40d87d8231015b1edc24cbd99faf0969e6f2cba0cfed0bc"),
    (
        "openssh-client",
        "1:9.2p1-2+deb12u10",
        "42c250b8b9110382488c53c066a960bc564ddac2cb9e449f47b6cdbb5fc1cb60",
    ),
    ("procps", "2:4.0.2-3", "d9d0e75779cb79af869181f17b93c5c263a2b89cac6a0193c436160a4483ddc1"),
    ("psmisc", "23.6-1", "9d02f654bdf280a6622a9b1371f7a1fa44546702d11991e438558bc259df7b69"),
    ("rsync", "3.2.7-1+deb12u6", "ce99de6b36cbb62dc614a73463e467f2c1ef509545a9a2b33cab19b50530b672"),
    ("sed", "4.9-1+deb12u1", "fd557efeee8aae4619c2cb7f68aadccb804322ad4a99ab048aaae5901d253885"),
    ("systemd", "252.39-1~deb12u2", "286f879c537bfba92e59d580c075ad20ab49020244c79634656850a306dd462b"),
    ("tar", "1.34+dfsg-1.2+deb12u1", "24fb92e98c2969171f81a8b589263d705f6b1670f95d121cd74c810d4605acc3"),
    ("tcpdump", "4.99.3-1", "43cedfb738376d263f3f9a29b7d9b2d70c1c12e14e76a20ce7aa0a867b39dfa8"),
    ("util-linux", "2.38.1-5+deb12u3", "8eb241ff24b2e1ee9c0373f4fc9bc728b85bf5966c1496154df7da01c0e42f34"),
)
ZH_SECTIONS = ("man1", "man5", "man7", "man8")  # man2/3/4/6 of manpages-zh: Tcl/Tk and a few stubs
EN_ALL = {
    "coreutils": ("man1",),
    "manpages": ("man5", "man7"),
}  # every page of these; of the rest, pairs only
EN_EXTRA = {"rsync.1"}  # English-only pages kept on purpose (identifier queries)
REFERENCE = re.compile(r"usr/share/debian-reference/((?:ch\d\d|pr01|apa))\.(en|zh-cn)\.html$")
GROFF = ["groff", "-k", "-Kutf8", "-man", "-Tutf8", "-P-cbou", "-rcR=1", "-rHY=0", "-dAD=l", "-rLL=200n"]


@dataclass(frozen=True)
class Page:
    rel: str  # path in the corpus
    source: str  # package/member it came from
    data: bytes  # roff source (man) or the file itself (html)


def deb_prefix(package: str, version: str) -> str:
    """How apt-get download names the file (an epoch's colon is written %3a)."""
    return f"{package}_{version.replace(':', '%3a')}_"


def fetch(debs: Path, package: str, version: str, sha256: str) -> Path:
    """The pinned .deb in `debs`, downloaded with apt-get when missing; its sha256 checked."""
    debs.mkdir(parents=True, exist_ok=True)
    prefix = deb_prefix(package, version)
    found = sorted(debs.glob(prefix + "*.deb"))
    if not found:
        subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=debs, check=True)
        found = sorted(debs.glob(prefix + "*.deb"))
    if not found:
        sys.exit(f"build: apt-get download {package}={version} wrote no {prefix}*.deb in {debs}")
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != sha256:
        sys.exit(f"build: {found[0]} has sha256 {digest}, expected {sha256}; delete it and run again "
                 "(a pinned version gone from the mirror is on snapshot.debian.org)")  # fmt: skip
    return found[0]


def deb_members(deb: Path) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every regular file in the package's data.tar.*."""
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        sys.exit(f"build: {deb} is not a .deb (ar archive)")
    pos = 8
    while pos < len(raw):
        name = raw[pos : pos + 16].decode().strip().rstrip("/")
        size = int(raw[pos + 48 : pos + 58].decode().strip())
        body = raw[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size % 2)
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                for m in tar:
                    f = tar.extractfile(m) if m.isreg() else None
                    if f is not None:
                        yield m.name.removeprefix("./"), f.read()
            return


def _man(name: str) -> tuple[str, str] | None:
    """('man1', 'du.1') for usr/share/man/[zh_CN/]man1/du.1.gz."""
    p = PurePosixPath(name)
    if p.suffix != ".gz" or len(p.parts) < 2 or not p.parts[-2].startswith("man"):
        return None
    return p.parts[-2], p.name.removesuffix(".gz")


def select(debs: dict[str, Path]) -> list[Page]:
    zh: dict[str, Page] = {}
    for name, data in deb_members(debs["manpages-zh"]):
        man = _man(name)
        if man and "/zh_CN/" in name and man[0] in ZH_SECTIONS:
            zh[man[1]] = Page(f"zh/{man[0]}/{man[1]}.md", f"manpages-zh:{name}", gzip.decompress(data))
    pages = list(zh.values())
    for package, _, _ in PINS:
        if package == "manpages-zh" or package.startswith("debian-reference"):
            continue
        for name, data in deb_members(debs[package]):
            man = _man(name)
            if not man or "/man/man" not in "/" + name:
                continue
            wanted = man[0] in EN_ALL.get(package, ()) or man[1] in zh or man[1] in EN_EXTRA
            if wanted:
                pages.append(Page(f"en/{man[0]}/{man[1]}.md", f"{package}:{name}", gzip.decompress(data)))
    for package in ("debian-reference-en", "debian-reference-zh-cn"):
        for name, data in deb_members(debs[package]):
            m = REFERENCE.search(name)
            if m:
                pages.append(
                    Page(f"debian-reference/{m.group(2)}/{m.group(1)}.html", f"{package}:{name}", data)
                )
    seen: dict[str, Page] = {}
    for p in pages:  # a page shipped twice (e.g. by util-linux and mount) is kept once: the first package's
        seen.setdefault(p.rel, p)
    return sorted(seen.values(), key=lambda p: p.rel)


_SECTION = re.compile(r"^(\S.*)$")
_SUB = re.compile(r"^ {3}(\S.*)$")


def man_to_markdown(title: str, roff: bytes) -> str:
    """A man page rendered by groff as Markdown: `# title`, `## SECTION`, `### Subsection`, text as is."""
    text = subprocess.run(GROFF, input=roff, capture_output=True, check=True,
                          env={**os.environ, "LC_ALL": "C.UTF-8"}).stdout.decode("utf-8", "replace")  # fmt: skip
    body = [ln.rstrip() for ln in text.splitlines()]
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    body = body[1:-1]  # groff's running header (DU(1) ... DU(1)) and footer
    out = [f"# {title}", ""]
    for ln in body:
        if m := _SECTION.match(ln):
            out += ["", f"## {m.group(1)}", ""]
        elif m := _SUB.match(ln):
            out += ["", f"### {m.group(1)}", ""]
        else:
            line = ln[7:] if ln.startswith(" " * 7) else ln.lstrip()
            out.append("\\" + line if line.startswith(("#", "=", "-" * 3)) else line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def render(page: Page) -> bytes:
    if page.rel.endswith(".html"):
        return page.data
    name = PurePosixPath(page.rel).name.removesuffix(".md")
    stem, _, section = name.rpartition(".")
    return man_to_markdown(f"{stem}({section})", page.data).encode()


def build(out: Path, debs_dir: Path) -> dict[str, str]:
    debs = {pkg: fetch(debs_dir, pkg, ver, sha) for pkg, ver, sha in PINS}
    pages = select(debs)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        rendered = list(pool.map(render, pages))
    return write_corpus(out, ((page.rel, data) for page, data in zip(pages, rendered, strict=True)))


def write_corpus(out: Path, pages: Iterable[tuple[str, bytes]]) -> dict[str, str]:
    """Replace the folder `out` with `pages` (path in the corpus, bytes); each file's sha256 by its path (every
    development set's builder writes its corpus this way)."""
    if out.exists():
        shutil.rmtree(out)
    manifest: dict[str, str] = {}
    for rel, data in pages:
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        manifest[rel] = hashlib.sha256(data).hexdigest()
    return manifest


def committed_set_main(
    argv: list[str] | None,
    doc: str,
    pins: tuple[tuple[str, str, str], ...],
    build_set: Callable[[Path, Path], dict[str, str]],
    here: Path,
) -> int:
    """The command line of a set whose manifest is committed beside its builder (`here`): build OUT, write
    OUT/../manifest.json, and with --check fail unless the files are the committed manifest's."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("out", type=Path, help="corpus directory (replaced)")
    ap.add_argument("--debs", type=Path, help="where the .deb files are kept (default: OUT/../debs)")
    ap.add_argument(
        "--check", action="store_true", help="fail unless the build equals the committed manifest"
    )
    args = ap.parse_args(argv)
    out = args.out.expanduser().resolve()
    files = build_set(out, (args.debs or out.parent / "debs").expanduser().resolve())
    manifest = {"pins": [list(p) for p in pins], "files": files}
    if args.check:
        before = json.loads((here / "manifest.json").read_text())["files"]
        if before != files:
            diff = sorted(set(before.items()) ^ set(files.items()))
            sys.exit(f"build: not the committed corpus ({len(diff)} differences, e.g. {diff[:3]})")
    (out.parent / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(files)} documents in {out}", file=sys.stderr)
    return 0


def groff_version() -> str:
    return subprocess.run(["groff", "--version"], capture_output=True, text=True, check=True).stdout.split(
        "\n"
    )[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path, help="corpus directory (replaced)")
    ap.add_argument("--debs", type=Path, help="where the .deb files are kept (default: OUT/../debs)")
    ap.add_argument("--check", action="store_true", help="fail unless the build equals OUT/manifest.json's")
    args = ap.parse_args(argv)
    out = args.out.expanduser().resolve()
    if shutil.which("groff") is None:
        sys.exit("build: groff is needed to render the man pages (apt-get install groff)")
    before = json.loads((out.parent / "manifest.json").read_text()) if args.check else None
    files = build(out, (args.debs or out.parent / "debs").expanduser().resolve())
    manifest = {"groff": groff_version(), "pins": [list(p) for p in PINS], "files": files}
    if before is not None and before["files"] != files:
        diff = sorted(set(before["files"].items()) ^ set(files.items()))
        sys.exit(f"build: not the same corpus as before ({len(diff)} differences, e.g. {diff[:3]})")
    (out.parent / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(files)} documents in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
