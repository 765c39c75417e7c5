"""The parse stage on documents generated at test time (tests/support/docgen.py)."""

from __future__ import annotations

import codecs
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ragd.config import LimitsConfig, ParseConfig
from ragd.errors import FileSkipped, ParseError
from ragd.pipeline.parse import SUPPORTED_EXTENSIONS, parse
from tests.support import docgen

LIMITS = LimitsConfig()
CJK_EMOJI = "知识库 ナレッジ 지식 🚀📚 café"
CHINESE = "第一章 总则\n\n这是一个中文文档，用来测试编码检测。知识库需要正确地解码各种编码的文本文件。\n"
WEIRD_NAMES = ["quote\"d 'single'", "100% done_", "with  spaces", "new\nline", "emoji 🚀", "中文 文件名"]


# --- the public surface -------------------------------------------------------------------------


def test_supported_extensions_are_lower_case_with_dot() -> None:
    required = {
        ".md",
        ".markdown",
        ".txt",
        ".html",
        ".htm",
        ".pdf",
        ".docx",
        ".pptx",
        ".xlsx",
        ".xls",
        ".csv",
        ".json",
        ".doc",
        ".ppt",
        ".odt",
        ".ods",
        ".odp",
    }
    assert required <= SUPPORTED_EXTENSIONS
    assert all(ext.startswith(".") and ext == ext.lower() for ext in SUPPORTED_EXTENSIONS)


def test_importing_parse_loads_no_heavy_library() -> None:
    code = (
        "import sys, ragd.pipeline.parse\n"
        "names = ('markitdown', 'pypdfium2', 'charset_normalizer', 'magika', 'pandas')\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_extension_is_case_insensitive(tmp_path: Path) -> None:
    doc = parse(docgen.write_text(tmp_path / "NOTES.MD", "# Loud\n"), LIMITS)
    assert doc.is_markdown and doc.title == "Loud"


# --- text files ---------------------------------------------------------------------------------


def test_markdown(tmp_path: Path) -> None:
    path = docgen.write_text(tmp_path / "readme.md", f"Intro line\n\n# The Title\n\n{CJK_EMOJI}\n")
    doc = parse(path, LIMITS)
    assert doc.path == path
    assert doc.parser == "text" and doc.is_markdown and doc.encoding is None
    assert doc.title == "The Title"
    assert CJK_EMOJI in doc.text and doc.pages == ()


def test_txt_is_plain_and_newlines_are_normalised(tmp_path: Path) -> None:
    doc = parse(docgen.write_text(tmp_path / "a.txt", "one\r\ntwo\rthree\n"), LIMITS)
    assert not doc.is_markdown
    assert doc.text == "one\ntwo\nthree\n"
    assert doc.title is None


def test_utf8_bom_is_stripped(tmp_path: Path) -> None:
    doc = parse(docgen.write_text(tmp_path / "bom.md", "# Título\nñ\n", bom=True), LIMITS)
    assert doc.text == "# Título\nñ\n"
    assert doc.encoding is None and doc.title == "Título"


def test_utf16_with_bom(tmp_path: Path) -> None:
    doc = parse(docgen.write_text(tmp_path / "u16.txt", "\ufeff" + CHINESE, "utf-16-le"), LIMITS)
    assert doc.text == CHINESE and doc.encoding == "utf-16"


@pytest.mark.parametrize("encoding", ["gbk", "gb18030", "big5"])
def test_chinese_legacy_encodings(tmp_path: Path, encoding: str) -> None:
    text = CHINESE if encoding != "big5" else "這是一個繁體中文的文件，用來測試編碼偵測是否正確。\n"
    doc = parse(docgen.write_text(tmp_path / f"{encoding}.txt", text, encoding), LIMITS)
    assert doc.text == text
    assert doc.encoding is not None and doc.encoding.lower().replace("_", "") in ("gbk", "gb18030", "big5")


def test_gb18030_beyond_gbk(tmp_path: Path) -> None:
    text = CHINESE + "生僻字：𠀀𪚥，欧元 €。\n"
    doc = parse(docgen.write_text(tmp_path / "gb.md", "# 标题\n" + text, "gb18030"), LIMITS)
    assert doc.text == "# 标题\n" + text and doc.title == "标题" and doc.encoding == "gb18030"


def test_shift_jis(tmp_path: Path) -> None:
    text = "これは日本語のテキストです。文字コードの検出をテストします。\n"
    doc = parse(docgen.write_text(tmp_path / "jp.txt", text, "shift_jis"), LIMITS)
    assert doc.text == text and doc.encoding in ("shift_jis", "cp932")


@pytest.mark.parametrize(
    ("name", "damage", "replaced"),
    [
        ("stray.md", lambda b: b[:30] + b"\xff" + b[30:], 1),  # a byte between two characters
        ("cut.txt", lambda b: b[:-1], 2),  # the last character cut off: 2 of its 3 bytes left
        ("bom.txt", lambda b: codecs.BOM_UTF8 + b[:39] + b"\x80" + b[39:], 1),
        ("page.html", lambda b: b"<p>" + b[:30] + b"\xfe" + b[30:] + b"</p>", 1),
    ],
)
def test_damaged_utf8_is_text_with_its_bad_bytes_replaced(
    tmp_path: Path, name: str, damage: Callable[[bytes], bytes], replaced: int
) -> None:
    data = damage((CHINESE + "机器学习。").encode())
    doc = parse(docgen.write_bytes(tmp_path / name, data), LIMITS)
    assert "知识库需要正确地解码" in doc.text and doc.encoding is None
    assert doc.text.count("\ufffd") == 1
    assert doc.warning == f"{replaced} undecodable byte{'s' if replaced > 1 else ''} replaced (U+FFFD)"


def test_a_short_chinese_file_cut_mid_character(tmp_path: Path) -> None:
    doc = parse(docgen.write_bytes(tmp_path / "short.txt", "知识库".encode()[:-1]), LIMITS)
    assert doc.text == "知识\ufffd" and doc.warning == "2 undecodable bytes replaced (U+FFFD)"


def test_a_readme_with_no_extension_and_a_stray_byte_is_text(tmp_path: Path) -> None:
    data = (CHINESE * 3).encode()
    doc = parse(docgen.write_bytes(tmp_path / "README", data[:30] + b"\x80" + data[30:]), LIMITS)
    assert "知识库需要正确地解码" in doc.text and doc.warning == "1 undecodable byte replaced (U+FFFD)"


def test_clean_text_has_no_warning(tmp_path: Path) -> None:
    assert parse(docgen.write_text(tmp_path / "ok.txt", CHINESE), LIMITS).warning is None
    assert parse(docgen.write_text(tmp_path / "gbk.txt", CHINESE, "gbk"), LIMITS).warning is None


def test_text_in_a_legacy_encoding_is_not_read_as_damaged_utf8(tmp_path: Path) -> None:
    """cp1252 bytes are all undecodable as UTF-8 and EUC-JP's are half so: detected, never replaced."""
    doc = parse(docgen.write_text(tmp_path / "fr.txt", "Le café est très bon, à la française.\n" * 5, "cp1252"),
                LIMITS)  # fmt: skip
    assert "café" in doc.text and doc.warning is None
    text = "日本語のテキストです。これはテストの文章で、ひらがなとカタカナと漢字を含みます。\n" * 3
    doc = parse(docgen.write_text(tmp_path / "jp.txt", text, "euc_jp"), LIMITS)
    assert doc.text == text and doc.warning is None


def test_mostly_undecodable_bytes_are_still_binary(tmp_path: Path) -> None:
    """A few valid UTF-8 sequences among junk do not make it text."""
    data = ("知识".encode() + bytes(range(0x80, 0xC0))) * 40
    with pytest.raises(ParseError, match=r"undecodable|binary content"):
        parse(docgen.write_bytes(tmp_path / "junk.txt", data), LIMITS)


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("---\ntitle: From Front Matter\n---\n# Heading\n", "From Front Matter"),
        ('---\ndate: 2026\ntitle: "Quoted"\n---\nbody\n', "Quoted"),
        ("# **Bold Title**\n", "Bold Title"),
        ("```\n# not a heading\n```\n## Real **one** ##\n", "Real one"),
        ("# [ragd](https://x.org) `v2` &amp; more[¶](#top)\n", "ragd v2 & more"),
        ("Setext Title\n============\n\nbody\n", "Setext Title"),
        ("- item\n---\n", None),
        ("#hashtag is not a heading\n", None),
    ],
)
def test_markdown_titles(tmp_path: Path, text: str, title: str | None) -> None:
    assert parse(docgen.write_text(tmp_path / "t.md", text), LIMITS).title == title


def test_man_page_title(tmp_path: Path) -> None:
    text = "LS(1)           User Commands           LS(1)\n\nNAME\n       ls - list directory contents\n"
    assert parse(docgen.write_text(tmp_path / "ls.txt", text), LIMITS).title == "ls - list directory contents"


def test_org_title_and_rst_heading(tmp_path: Path) -> None:
    assert (
        parse(docgen.write_text(tmp_path / "a.org", "#+TITLE: Org Notes\n* one\n"), LIMITS).title
        == "Org Notes"
    )
    rst = parse(docgen.write_text(tmp_path / "a.rst", "=====\nGuide\n=====\n\ntext\n"), LIMITS)
    assert rst.title == "Guide" and not rst.is_markdown


@pytest.mark.parametrize("name", ["c.yaml", "c.toml", "app.log"])
def test_data_text_types_have_no_title(tmp_path: Path, name: str) -> None:
    doc = parse(docgen.write_text(tmp_path / name, "# comment\nkey = 'value'\n"), LIMITS)
    assert doc.title is None and doc.parser == "text" and not doc.is_markdown


def test_json(tmp_path: Path) -> None:
    doc = parse(docgen.make_json(tmp_path / "d.json", {"name": CJK_EMOJI, "n": [1, 2]}), LIMITS)
    assert CJK_EMOJI in doc.text and '"n"' in doc.text and not doc.is_markdown


# --- markitdown formats -------------------------------------------------------------------------


def test_html_title_and_body(tmp_path: Path) -> None:
    path = docgen.make_html(tmp_path / "p.html", "Page Title", f"<h1>Heading</h1><p>Hello {CJK_EMOJI}</p>")
    doc = parse(path, LIMITS)
    assert doc.parser == "html" and doc.is_markdown
    assert doc.title == "Page Title"
    assert "# Heading" in doc.text and CJK_EMOJI in doc.text
    assert "color: red" not in doc.text and "var x" not in doc.text


HTML_CASES = [
    "<html><head><title>T</title><style>p {color: red}</style></head><body><h1>One</h1><p>x</p>"
    "<h2>Two <a href='#two'>¶</a></h2><script>var x = 1;</script></body></html>",
    "<p>no body, <b>bold</b> and <i>it</i>; <a href='javascript:alert(1)'>js</a> <a href='mailto:a@b'>mail</a>"
    " <a href='https://e.org/a b/%41?q=1' title='say \"hi\"'>web</a> <a href='rel/path.html'>rel</a>"
    " <a href='https://e.org/x'>https://e.org/x</a></p>",
    "<table><tr><th>名称</th><th><img src='a.png' alt='图'></th></tr><tr><td><a href='x.html'><img src='"
    "data:image/png;base64,AAAA' alt='d'></a></td><td><input type='checkbox' checked> done</td></tr></table>",
    "<ul><li>一</li><li>two<ul><li>2.1</li></ul></li></ul><pre><a href='y'>code</a>\n  kept</pre><hr>"
    "<blockquote>quoted 🍄</blockquote><h3><img data-src='real.png' src='data:,' alt='lazy'></h3>",
]


@pytest.mark.parametrize("html", HTML_CASES)
def test_html_converts_as_markitdowns_converter_does_without_importing_markitdown(html: str) -> None:
    """parse/html.py converts HTML with BeautifulSoup and markdownify as markitdown's HtmlConverter does (its
    output checked equal on 273 of 278 pages of /usr/share/doc and the development set; the five others are
    malformed, and lxml's parser mends them as a browser does), without markitdown's import."""
    import io

    from markitdown import StreamInfo, converters

    from ragd.pipeline.parse.html import html_to_markdown

    want = converters.HtmlConverter().convert(
        io.BytesIO(html.encode()), StreamInfo(extension=".html", charset="utf-8")
    )
    assert html_to_markdown(html) == (want.markdown, want.title)


def test_html_tags_find_their_pre_parent_as_beautifulsoup_does_and_lone_surrogates_are_read() -> None:
    from bs4 import Tag

    from ragd.pipeline.parse import html as H

    page = ("<div><pre><span>a<b>b</b></span></pre><p class='x'>c<pre>d</pre></p><section><pre><i>e</i></pre>"
            "<em>f</em></section></div>")  # fmt: skip
    soup = H._soup(page)
    tags = soup.find_all(True)
    assert len(tags) > 8 and all(isinstance(t, H._Tag) for t in tags)
    for name in ("pre", "p", "section", "nothing"):
        assert [t.find_parent(name) for t in tags] == [Tag.find_parent(t, name) for t in tags]
    assert [t.find_parent("p", {"class": "x"}) for t in tags] == [
        Tag.find_parent(t, "p", {"class": "x"}) for t in tags
    ]
    # lxml refuses lone surrogates (bytes no encoding could decode): Python's parser reads them
    assert H.html_to_markdown("<h1>T</h1><p>a\udc80b</p>")[0] == "# T\n\na\udc80b"


def test_xhtml_and_a_page_that_looks_like_a_file_name_print_no_advice_into_the_log() -> None:
    """BeautifulSoup warns when an HTML parser reads XHTML (on purpose here) or when a page's whole text looks like
    a file name: printed once by each parse worker into the agent's log, it was noise. With warnings as errors:"""
    code = (
        "from ragd.pipeline.parse.html import html_to_markdown as h; "
        'assert h(\'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><p>x</p></body>'
        "</html>') == ('x', None); assert h('notes.html') == ('notes.html', None)"
    )
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True)


def test_an_html_file_is_parsed_without_importing_markitdown(tmp_path: Path) -> None:
    path = docgen.make_html(tmp_path / "p.html", "Page", "<h1>Heading</h1><p>text</p>")
    code = (
        "import sys; from pathlib import Path; from ragd.config import LimitsConfig; "
        "from ragd.pipeline.parse import parse; "
        f"doc = parse(Path({str(path)!r}), LimitsConfig()); "
        "assert '# Heading' in doc.text and doc.title == 'Page', doc; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('markitdown', 'magika', 'onnxruntime')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_htm_without_title_uses_first_heading_and_detects_gbk(tmp_path: Path) -> None:
    body = "<h2>标题</h2><p>" + CHINESE + "</p>"
    doc = parse(docgen.make_html(tmp_path / "p.htm", None, body, charset="gbk"), LIMITS)
    assert doc.title == "标题" and "这是一个中文文档" in doc.text
    assert doc.encoding is not None


def test_csv(tmp_path: Path) -> None:
    doc = parse(
        docgen.make_csv(tmp_path / "t.csv", [["name", "价格"], ["apple", "3"], ["pipe|cell", "4"]]), LIMITS
    )
    assert doc.is_markdown and doc.title is None
    assert "| name | 价格 |" in doc.text and "| apple | 3 |" in doc.text and "pipe\\|cell" in doc.text


def test_docx_title_from_core_properties(tmp_path: Path) -> None:
    path = docgen.make_docx(tmp_path / "d.docx", title="Core Title", heading="Intro", paragraphs=[CJK_EMOJI])
    doc = parse(path, LIMITS)
    assert doc.parser == "markitdown" and doc.is_markdown
    assert doc.title == "Core Title"
    assert "# Intro" in doc.text and CJK_EMOJI in doc.text


def test_docx_title_falls_back_to_first_heading(tmp_path: Path) -> None:
    doc = parse(docgen.make_docx(tmp_path / "d.docx", heading="Only Heading", paragraphs=["x"]), LIMITS)
    assert doc.title == "Only Heading"


def test_pptx(tmp_path: Path) -> None:
    path = docgen.make_pptx(tmp_path / "s.pptx", [("First Slide", "alpha body"), ("Second", CJK_EMOJI)])
    doc = parse(path, LIMITS)
    assert doc.title == "First Slide"
    assert "alpha body" in doc.text and CJK_EMOJI in doc.text
    assert doc.text.index("First Slide") < doc.text.index("Second")


def test_xlsx(tmp_path: Path) -> None:
    path = docgen.make_xlsx(
        tmp_path / "b.xlsx", [["name", "价格"], ["apple", 3]], sheet="Prices", title="Book"
    )
    doc = parse(path, LIMITS)
    assert doc.title == "Book"
    assert "## Prices" in doc.text and "| apple | 3 |" in doc.text and "价格" in doc.text


def test_xls(tmp_path: Path) -> None:
    doc = parse(docgen.make_xls(tmp_path / "b.xls", [["name", "价格"], ["pear", 5]], sheet="Old"), LIMITS)
    assert "## Old" in doc.text and "| pear | 5 |" in doc.text and doc.title is None


# --- OpenDocument (LibreOffice's formats, read without LibreOffice) ------------------------------


def test_odt_headings_lists_tables_and_running_text_as_written(tmp_path: Path) -> None:
    path = docgen.make_odt(
        tmp_path / "笔记 \"q\" %_.odt", heading="Intro 引言",
        paragraphs=["Use rsync --delete, see #tag and ~/kb", CJK_EMOJI],
        items=["first item", "- a dash of its own"], rows=[["name", "价格"], ["apple", 3]],
    )  # fmt: skip
    doc = parse(path, LIMITS)
    assert doc.parser == "odfdo" and doc.is_markdown
    assert doc.title == "Intro 引言"  # no title in its properties: the first heading
    assert doc.text.startswith("# Intro 引言\n")
    assert "Use rsync --delete, see #tag and ~/kb" in doc.text  # odfdo's escapes undone in running text
    assert CJK_EMOJI in doc.text and "| apple | 3  |" in doc.text and "价格" in doc.text
    assert "first item" in doc.text and "- a dash of its own" in doc.text


def test_odt_title_and_metadata_from_its_properties(tmp_path: Path) -> None:
    doc = parse(
        docgen.make_odt(tmp_path / "t.odt", title="Spec 规格", heading="Intro", paragraphs=["x"]), LIMITS
    )
    assert doc.title == "Spec 规格"
    assert doc.metadata is not None and doc.metadata.fields["title"] == ("Spec 规格",)


def test_odt_an_escaped_dash_or_hash_that_starts_a_line_stays_escaped(tmp_path: Path) -> None:
    doc = parse(
        docgen.make_odt(tmp_path / "t.odt", paragraphs=["# not a heading", "- not an item", "ok"]), LIMITS
    )
    assert "\\# not a heading" in doc.text and "\\- not an item" in doc.text


def test_ods_one_section_per_sheet_with_text(tmp_path: Path) -> None:
    path = docgen.make_ods(tmp_path / "b.ods", {"Prices": [["name", "价格"], ["apple", 3]], "Empty": [[""]]},
                           title="Book")  # fmt: skip
    doc = parse(path, LIMITS)
    assert doc.title == "Book"
    assert doc.text.startswith("## Prices\n") and "| apple | 3  |" in doc.text and "价格" in doc.text
    assert "## Empty" not in doc.text  # (nor the template's empty first sheet)


def test_odp_a_section_per_slide_titled_by_its_first_frame(tmp_path: Path) -> None:
    doc = parse(
        docgen.make_odp(tmp_path / "s.odp", [("First Slide", "alpha body"), ("Second", CJK_EMOJI)]), LIMITS
    )
    assert doc.title == "First Slide"
    assert doc.text == f"# First Slide\n\nalpha body\n\n# Second\n\n{CJK_EMOJI}"


def test_a_zip_that_is_not_an_odf_file(tmp_path: Path) -> None:
    path = tmp_path / "z.odt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hello.txt", "not a document")
    with pytest.raises(ParseError, match=r"corrupt \.odt file: no content.xml"):
        parse(path, LIMITS)


def test_an_odf_file_with_broken_content(tmp_path: Path) -> None:
    good = docgen.make_odt(tmp_path / "g.odt", paragraphs=["x"])
    path = tmp_path / "b.odt"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            zout.writestr(
                info, b"<office:document-content" if info.filename == "content.xml" else zin.read(info)
            )
    with pytest.raises(ParseError, match=r"corrupt or unreadable \.odt file: \w+"):
        parse(path, LIMITS)


@pytest.mark.parametrize("ext", [".odt", ".ods", ".odp"])
def test_encrypted_odf(tmp_path: Path, ext: str) -> None:
    source = {".odt": lambda p: docgen.make_odt(p, paragraphs=["secret"]),
              ".ods": lambda p: docgen.make_ods(p, {"S": [["secret"]]}),
              ".odp": lambda p: docgen.make_odp(p, [("secret", "plan")])}[ext](tmp_path / f"plain{ext}")  # fmt: skip
    with pytest.raises(ParseError, match=rf"encrypted \(password-protected\) \{ext} file"):
        parse(docgen.make_encrypted_odf(source, tmp_path / f"e{ext}"), LIMITS)


def test_an_odf_file_of_another_kind_says_so(tmp_path: Path) -> None:
    path = docgen.make_ods(tmp_path / "sheet.odt", {"S": [["a"]]})
    with pytest.raises(ParseError, match=r"holds an OpenDocument spreadsheet, not a text"):
        parse(path, LIMITS)


def test_an_odt_without_text_is_skipped(tmp_path: Path) -> None:
    with pytest.raises(FileSkipped, match="no extractable text"):
        parse(docgen.make_odt(tmp_path / "empty.odt"), LIMITS)


# --- PDF ----------------------------------------------------------------------------------------


def test_pdf_pages_and_title(tmp_path: Path) -> None:
    texts = ["First page alpha", "Second page beta", "Third page gamma"]
    doc = parse(docgen.make_pdf(tmp_path / "m.pdf", texts, title="Meta Title"), LIMITS)
    assert doc.parser == "pdfium" and not doc.is_markdown
    assert doc.title == "Meta Title"
    assert [p.number for p in doc.pages] == [1, 2, 3]
    for span, expected in zip(doc.pages, texts, strict=True):
        assert doc.text[span.start : span.end] == expected
        assert doc.page_at(span.start) == span.number
    assert doc.text == "\n\n".join(texts)
    assert doc.page_at(doc.text.index("beta")) == 2


def test_pdf_without_metadata_title(tmp_path: Path) -> None:
    assert parse(docgen.make_pdf(tmp_path / "n.pdf", ["just text"]), LIMITS).title is None


def test_scanned_pdf_is_skipped_with_ocr_off(tmp_path: Path) -> None:
    with pytest.raises(
        FileSkipped, match=r"no extractable text \(scanned PDF\? OCR unavailable: \[parse\] ocr is off"
    ):
        parse(docgen.make_scanned_pdf(tmp_path / "scan.pdf"), LIMITS, ParseConfig(ocr=False))


def test_encrypted_pdf(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"encrypted \(password-protected\) PDF"):
        parse(docgen.make_pdf(tmp_path / "e.pdf", ["secret"], user_password="pw"), LIMITS)


def test_corrupt_pdf(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="corrupt PDF"):
        parse(docgen.make_corrupt_pdf(tmp_path / "c.pdf"), LIMITS)


def test_truncated_pdf(tmp_path: Path) -> None:
    good = docgen.make_pdf(tmp_path / "g.pdf", ["some text"]).read_bytes()
    with pytest.raises(ParseError, match="corrupt PDF"):
        parse(docgen.write_bytes(tmp_path / "t.pdf", good[: len(good) // 3]), LIMITS)


def test_pdfs_parse_concurrently(tmp_path: Path) -> None:
    paths = [docgen.make_pdf(tmp_path / f"{i}.pdf", [f"doc {i} page {p}" for p in (1, 2)]) for i in range(6)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        docs = list(pool.map(lambda p: parse(p, LIMITS), paths))
    assert [d.text for d in docs] == [f"doc {i} page 1\n\ndoc {i} page 2" for i in range(6)]


# --- bad inputs ---------------------------------------------------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(FileSkipped, match=r"empty file \(0 bytes\)"):
        parse(docgen.write_bytes(tmp_path / "e.md", b""), LIMITS)


def test_whitespace_only_file(tmp_path: Path) -> None:
    with pytest.raises(FileSkipped, match="no extractable text"):
        parse(docgen.write_text(tmp_path / "w.txt", " \n\t\n"), LIMITS)


def test_too_large(tmp_path: Path) -> None:
    with pytest.raises(FileSkipped, match=r"file too large: 100 bytes > limits.max_file_size 10"):
        parse(docgen.write_text(tmp_path / "big.txt", "x" * 100), LimitsConfig(max_file_size=10))


def test_text_too_long_is_not_truncated(tmp_path: Path) -> None:
    with pytest.raises(FileSkipped, match=r"text too long: 1500 characters > max_text_chars 1000"):
        parse(docgen.write_text(tmp_path / "long.md", "y" * 1500), LimitsConfig(max_text_chars=1000))


@pytest.mark.parametrize("name", ["junk.txt", "junk.md", "junk.json", "junk.html", "junk.csv"])
def test_binary_junk_under_a_text_extension(tmp_path: Path, name: str) -> None:
    with pytest.raises(ParseError, match="binary content"):
        parse(docgen.write_bytes(tmp_path / name, docgen.junk_bytes()), LIMITS)


@pytest.mark.parametrize("name", ["ctrl.txt", "ctrl.md"])
def test_control_character_junk(tmp_path: Path, name: str) -> None:
    with pytest.raises(ParseError, match="control characters"):
        parse(docgen.write_bytes(tmp_path / name, docgen.control_junk()), LIMITS)


def test_undecodable_high_bytes(tmp_path: Path) -> None:
    junk = bytes(b for b in docgen.junk_bytes(8192) if b >= 0x80)
    with pytest.raises(ParseError, match=r"undecodable|control characters"):
        parse(docgen.write_bytes(tmp_path / "hi.txt", junk), LIMITS)


@pytest.mark.parametrize("ext", [".docx", ".pptx", ".xlsx", ".odt", ".ods", ".odp"])
def test_corrupt_office_package(tmp_path: Path, ext: str) -> None:
    with pytest.raises(ParseError, match=rf"corrupt \{ext} file: not a zip archive"):
        parse(docgen.write_bytes(tmp_path / f"c{ext}", docgen.junk_bytes(seed=9)), LIMITS)


def test_zip_that_is_not_a_docx(tmp_path: Path) -> None:
    path = tmp_path / "z.docx"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hello.txt", "not a word document")
    with pytest.raises(ParseError, match=r"corrupt or unreadable \.docx file: \w+"):
        parse(path, LIMITS)


def test_corrupt_xls(tmp_path: Path) -> None:
    data = docgen.CFB_MAGIC + docgen.junk_bytes(seed=7)
    with pytest.raises(ParseError, match=r"\.xls"):
        parse(docgen.write_bytes(tmp_path / "c.xls", data), LIMITS)


@pytest.mark.parametrize("ext", [".docx", ".pptx", ".xlsx"])
def test_encrypted_ooxml(tmp_path: Path, ext: str) -> None:
    with pytest.raises(ParseError, match=rf"encrypted \(password-protected\) \{ext} file"):
        parse(docgen.make_fake_encrypted_ooxml(tmp_path / f"e{ext}"), LIMITS)


def test_ole_container_without_encryption_marker(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"encrypted \(password-protected\) or legacy-format \.docx"):
        parse(docgen.make_fake_encrypted_ooxml(tmp_path / "o.docx", marker=False), LIMITS)


@pytest.mark.parametrize("name", ["movie.mp4", "archive.zip", "photo.GIF", "data.Debian"])
def test_unsupported_extension(tmp_path: Path, name: str) -> None:
    with pytest.raises(FileSkipped, match="unsupported file type"):
        parse(docgen.write_bytes(tmp_path / name, b"data"), LIMITS)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("README", b"Read me first.\n\nThe tool installs itself.\n"),
        ("README.Debian", "Debian notes: 安装说明 for this package.\n".encode()),
        ("NEWS", "Caf\xe9 au lait: version 2 is out.\n".encode("latin-1")),  # not UTF-8: charset-normalizer
        ("notes", b"a plain note with no extension\n"),
        ("changelog.Debian", b"pkg (1.0-1) unstable; urgency=low\n"),
    ],
)
def test_text_named_like_documentation_or_without_extension_is_read(
    tmp_path: Path, name: str, data: bytes
) -> None:
    doc = parse(docgen.write_bytes(tmp_path / name, data), LIMITS)
    assert doc.parser == "text" and doc.text.strip() and doc.title is None


@pytest.mark.parametrize("name", ["README", "blob", "INSTALL.bin"])
def test_binary_without_a_known_extension_is_not_text(tmp_path: Path, name: str) -> None:
    with pytest.raises(
        FileSkipped, match=r"not text: .* has no known extension and does not start with text"
    ):
        parse(docgen.write_bytes(tmp_path / name, b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))), LIMITS)


# --- .doc / .ppt through LibreOffice ------------------------------------------------------------


@pytest.mark.parametrize("ext", [".doc", ".ppt"])
def test_legacy_office_without_soffice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ext: str) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(FileSkipped, match=rf"needs LibreOffice \(soffice\) on PATH to convert \{ext}"):
        parse(docgen.write_bytes(tmp_path / f"old{ext}", docgen.CFB_MAGIC + b"x" * 100), LIMITS)


def _with_fake_soffice(
    monkeypatch: pytest.MonkeyPatch, bindir: Path, docx: Path | None, sleep: float = 0
) -> None:
    docgen.make_fake_soffice(bindir, docx, sleep=sleep)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_doc_converted_by_soffice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docx = docgen.make_docx(tmp_path / "conv.docx", title="Converted", paragraphs=["legacy words"])
    _with_fake_soffice(monkeypatch, tmp_path / "bin", docx)
    source = docgen.write_bytes(tmp_path / "old 'name'\n.doc", docgen.CFB_MAGIC + b"x" * 100)
    doc = parse(source, LIMITS)
    assert doc.path == source and doc.parser == "soffice+markitdown"
    assert doc.title == "Converted" and "legacy words" in doc.text


def test_soffice_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_fake_soffice(monkeypatch, tmp_path / "bin", None)
    with pytest.raises(
        ParseError, match=r"LibreOffice could not convert \.doc \(exit status 1\).*could not be loaded"
    ):
        parse(docgen.write_bytes(tmp_path / "bad.doc", b"junk"), LIMITS)


def test_soffice_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_fake_soffice(monkeypatch, tmp_path / "bin", None, sleep=30)
    with pytest.raises(ParseError, match=r"LibreOffice conversion of \.ppt timed out after 0.5 s"):
        parse(docgen.write_bytes(tmp_path / "slow.ppt", b"junk"), LimitsConfig(parse_timeout=0.5))


# --- file names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", WEIRD_NAMES)
def test_odd_file_names(tmp_path: Path, stem: str) -> None:
    md = parse(docgen.write_text(tmp_path / f"{stem}.md", "# Odd\nbody\n"), LIMITS)
    assert md.title == "Odd" and md.path.name == f"{stem}.md"
    pdf = parse(docgen.make_pdf(tmp_path / f"{stem}.pdf", ["pdf body"]), LIMITS)
    assert pdf.text == "pdf body"


def test_odd_file_name_office(tmp_path: Path) -> None:
    stem = "".join(WEIRD_NAMES)
    xlsx = parse(docgen.make_xlsx(tmp_path / f"{stem}.xlsx", [["k", "v"], ["a", 1]]), LIMITS)
    assert "| a | 1 |" in xlsx.text
    html = parse(docgen.make_html(tmp_path / f"{stem}.html", "T", "<p>x</p>"), LIMITS)
    assert html.title == "T"


def test_a_compressed_file_says_so(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "README.Debian.gz"
    path.write_bytes(gzip.compress(b"Debian notes\n"))
    with pytest.raises(FileSkipped, match=r"compressed file '\.gz': not read"):
        parse(path, LIMITS)
