"""Sample documents built at test time (nothing binary is checked in).

Every function writes one file at the given path and returns that path. Content is deterministic: "random"
bytes come from a seeded generator.
"""

from __future__ import annotations

import csv
import json
import random
import zipfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

CFB_MAGIC = bytes.fromhex(
    "D0CF11E0A1B11AE1"
)  # OLE2 / Compound File Binary: legacy Office and encrypted OOXML


def junk_bytes(size: int = 4096, seed: int = 1) -> bytes:
    """Deterministic random bytes (contains NUL bytes, like any real binary file)."""
    return random.Random(seed).randbytes(size)


def control_junk(size: int = 4096, seed: int = 2) -> bytes:
    """Bytes that decode as UTF-8 but are almost all control characters (no NUL)."""
    rnd = random.Random(seed)
    return bytes(rnd.choice((*range(1, 9), *range(14, 32))) for _ in range(size))


def write_text(path: Path, text: str, encoding: str = "utf-8", *, bom: bool = False) -> Path:
    data = text.encode(encoding)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def make_html(path: Path, title: str | None, body: str, *, charset: str = "utf-8") -> Path:
    head = f"<title>{title}</title>" if title is not None else ""
    html = (
        f'<!DOCTYPE html>\n<html><head><meta charset="{charset}">{head}'
        f"<style>p {{color: red}}</style><script>var x = 1;</script></head>\n<body>{body}</body></html>\n"
    )
    path.write_bytes(html.encode(charset))
    return path


def make_csv(path: Path, rows: Sequence[Sequence[object]], encoding: str = "utf-8") -> Path:
    with path.open("w", newline="", encoding=encoding) as fh:
        csv.writer(fh).writerows(rows)
    return path


def make_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def make_docx(
    path: Path, *, title: str | None = None, heading: str | None = None, paragraphs: Sequence[str] = ()
) -> Path:
    import docx

    doc = docx.Document()
    doc.core_properties.title = title or ""
    if heading is not None:
        doc.add_heading(heading, level=1)
    for text in paragraphs:
        doc.add_paragraph(text)
    doc.save(str(path))
    return path


def make_pptx(path: Path, slides: Sequence[tuple[str, str]], *, title: str | None = None) -> Path:
    """One slide per (title, body) pair, with the "Title and Content" layout."""
    import pptx

    prs = pptx.Presentation()
    prs.core_properties.title = title or ""
    for slide_title, body in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = slide_title
        slide.placeholders[1].text = body
    prs.save(str(path))
    return path


def make_xlsx(
    path: Path, rows: Sequence[Sequence[object]], *, sheet: str = "Data", title: str | None = None
) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = sheet
    for row in rows:
        ws.append(list(row))
    if title:
        wb.properties.title = title
    wb.save(str(path))
    return path


def make_xls(path: Path, rows: Sequence[Sequence[object]], *, sheet: str = "Data") -> Path:
    import xlwt

    wb = xlwt.Workbook(encoding="utf-8")
    ws = wb.add_sheet(sheet)
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            ws.write(r, c, value)
    wb.save(str(path))
    return path


def make_pdf(
    path: Path,
    pages: Sequence[str],
    *,
    title: str | None = None,
    user_password: str | None = None,
    author: str | None = None,
    created: datetime | None = None,
) -> Path:
    """A PDF with one page per text (core Helvetica font: latin-1 text only). `user_password` encrypts it."""
    from fpdf import FPDF

    pdf = FPDF()
    if title:
        pdf.set_title(title)
    if author:
        pdf.set_author(author)
    if created:
        pdf.set_creation_date(created)
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    if user_password is not None:
        pdf.set_encryption(owner_password="owner-" + user_password, user_password=user_password)
    pdf.output(str(path))
    return path


def make_scanned_pdf(path: Path, n_pages: int = 2) -> Path:
    """Pages with only graphics and no text layer, like a scan."""
    from fpdf import FPDF

    pdf = FPDF()
    for i in range(n_pages):
        pdf.add_page()
        pdf.set_fill_color(40 * i, 100, 150)
        pdf.rect(20, 20, 120, 80, style="F")
    pdf.output(str(path))
    return path


def make_corrupt_pdf(path: Path) -> Path:
    """A PDF header followed by junk: no xref, no objects."""
    path.write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + junk_bytes(2048, seed=3))
    return path


def make_odt(
    path: Path, *, title: str | None = None, heading: str | None = None, paragraphs: Sequence[str] = (),
    items: Sequence[str] = (), rows: Sequence[Sequence[object]] = (),
) -> Path:  # fmt: skip
    """An OpenDocument text (odfdo, from its own template): a heading, paragraphs, a bulleted list, a table."""
    from odfdo import Document, Header, List, Paragraph

    doc = Document("text")
    if title:
        doc.meta.set_title(title)
    if heading is not None:
        doc.body.append(Header(1, heading))
    for text in paragraphs:
        doc.body.append(Paragraph(text))
    if items:
        doc.body.append(List(list(items)))
    if rows:
        doc.body.append(_odf_table("T1", rows))
    doc.save(path)
    return path


def make_ods(path: Path, sheets: dict[str, Sequence[Sequence[object]]], *, title: str | None = None) -> Path:
    """An OpenDocument spreadsheet, one sheet per name (its template's empty first sheet stays)."""
    from odfdo import Document

    doc = Document("spreadsheet")
    if title:
        doc.meta.set_title(title)
    for name, rows in sheets.items():
        doc.body.append(_odf_table(name, rows))
    doc.save(path)
    return path


def _odf_table(name: str, rows: Sequence[Sequence[object]]) -> Any:
    from odfdo import Table

    table = Table(name, width=max(len(r) for r in rows), height=len(rows))
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            table.set_value((c, r), value)
    return table


def make_odp(path: Path, slides: Sequence[tuple[str, str]], *, title: str | None = None) -> Path:
    """An OpenDocument presentation: one page per (title, body) pair, each a text frame."""
    from odfdo import Document, DrawPage, Frame

    doc = Document("presentation")
    doc.meta.set_title(title or "")  # (odfdo's template is titled "presentation")
    for i, (slide_title, body) in enumerate(slides):
        page = DrawPage(f"slide{i}", name=f"Slide {i + 1}")
        page.append(Frame.text_frame(slide_title, size=("20cm", "2cm"), position=("1cm", "1cm")))
        page.append(Frame.text_frame(body, size=("20cm", "10cm"), position=("1cm", "4cm")))
        doc.body.append(page)
    doc.save(path)
    return path


def make_encrypted_odf(source: Path, path: Path) -> Path:
    """`source` (an .odt/.ods/.odp) as LibreOffice saves it with a password: the same package, its content.xml
    replaced by ciphertext (random bytes here) and described by `encryption-data` in the manifest."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "content.xml":
                data = junk_bytes(len(data), seed=7)
            elif info.filename == "META-INF/manifest.xml":
                entry = b'manifest:full-path="content.xml"'
                start = data.index(entry)
                end = data.index(b"/>", start)
                data = (data[:end] + b'><manifest:encryption-data manifest:checksum-type="SHA1/1K" '
                        b'manifest:checksum="AAAA"><manifest:algorithm manifest:algorithm-name='
                        b'"http://www.w3.org/2001/04/xmlenc#aes256-cbc" manifest:initialisation-vector="AAAA"/>'
                        b"</manifest:encryption-data></manifest:file-entry>" + data[end + 2 :])  # fmt: skip
            zout.writestr(info, data)
    return path


def make_fake_encrypted_ooxml(path: Path, *, marker: bool = True) -> Path:
    """What Office writes for a password-protected .docx/.xlsx/.pptx: an OLE (CFB) container, not a zip.

    Only the signature and (optionally) the UTF-16 name of the "EncryptedPackage" stream are real here.
    """
    body = junk_bytes(512, seed=4)
    if marker:
        body += "EncryptedPackage".encode("utf-16-le") + junk_bytes(512, seed=5)
    path.write_bytes(CFB_MAGIC + body)
    return path


def make_fake_soffice(bindir: Path, docx_source: Path | None, *, sleep: float = 0.0) -> Path:
    """An executable `soffice` on `bindir` that mimics `--convert-to docx --outdir DIR FILE`.

    It copies `docx_source` to DIR/<stem of FILE>.docx (or, with `sleep`, hangs in a child process first).
    Used to exercise the .doc/.ppt path on machines without LibreOffice; it fakes an external program only.
    """
    import sys

    bindir.mkdir(parents=True, exist_ok=True)
    script = bindir / "soffice"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, shutil, subprocess, sys\n"
        "args = sys.argv[1:]\n"
        f"if {sleep!r}:\n"
        f"    subprocess.run(['sleep', str({sleep!r})])\n"
        "fmt = args[args.index('--convert-to') + 1]\n"
        "out = args[args.index('--outdir') + 1]\n"
        "src = args[-1]\n"
        "stem = os.path.splitext(os.path.basename(src))[0]\n"
        f"source = {str(docx_source) if docx_source else ''!r}\n"
        "if not source:\n"
        "    sys.exit('Error: source file could not be loaded')\n"
        "shutil.copyfile(source, os.path.join(out, stem + '.' + fmt))\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script
