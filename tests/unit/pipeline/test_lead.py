"""A document's lead (pipeline/lead.py): its title and first prose, what its vector is made of."""

from __future__ import annotations

import numpy as np

from ragd.index.records import decode_lead, encode_lead
from ragd.pipeline.lead import LEAD_CHARS, lead_hash, lead_text, title_of
from ragd.pipeline.split import context_header


def test_the_lead_is_the_title_and_the_first_prose_without_headings_tables_or_markup() -> None:
    header = context_header("ls.1.md", "ls - list directory contents", ("NAME",))
    first = "# NAME\n\nls - list directory contents\n\n## SYNOPSIS\n\n```\nls [OPTION]... [FILE]...\n```"
    second = "| flag | meaning |\n| --- | --- |\n\nList information about the FILEs (the current directory by default)."
    lead = lead_text(header, [first, second])
    assert lead == (
        "ls - list directory contents\nls - list directory contents List information about the FILEs "
        "(the current directory by default)."
    )
    assert "NAME" not in lead and "SYNOPSIS" not in lead and "|" not in lead and "```" not in lead


def test_overlapping_chunks_give_their_paragraph_once_and_the_lead_is_cut_at_its_length() -> None:
    para = "配置文件的每一项都写在这里，代理启动时读取它。 " * 3
    more = [f"Paragraph {n}: the agent keeps folders searchable at every moment." for n in range(20)]
    lead = lead_text("File: 配置.md", [para, para + "\n\n" + "\n\n".join(more)])
    assert lead.count("配置文件的每一项") == 3 and len(lead) == LEAD_CHARS  # no title: the prose alone
    assert lead_text("File: x.md", ["text"] * 5) == ""  # a paragraph shorter than MIN_PARAGRAPH is no prose


def test_only_the_first_chunks_are_read_and_a_document_with_nothing_to_say_has_no_lead() -> None:
    assert lead_text("File: a.csv", ["| a | b |", "| 1 | 2 |", "---", "the fourth chunk is never read"]) == ""
    assert lead_text("File: a.md | Title: Only a title", ["# Heading"]) == "Only a title"
    assert lead_hash("") == "d41d8cd98f00b204e9800998ecf8427e"


def test_the_title_is_read_from_the_header_even_with_a_bar_in_it() -> None:
    assert title_of(context_header("a.md", "A | B: the title", ("Intro",))) == "A | B: the title"
    assert title_of(context_header("a.md", "Title: odd", ())) == "Title: odd"
    assert title_of("File: notes.md | Section: Title: not one") == ""
    assert title_of("") == ""


def test_a_lead_vector_is_stored_as_half_floats_and_read_back_to_within_1e3() -> None:
    rng = np.random.default_rng(7)
    vec = rng.normal(size=512).astype(np.float32)
    raw = encode_lead(vec, 512, "/kb/a.md")
    back = decode_lead(raw, 512)
    assert back is not None and back.dtype == np.float32 and len(raw) == 1368
    assert abs(float(back @ (vec / np.linalg.norm(vec))) - 1.0) < 1e-3
    assert encode_lead(None, 512, "/kb/a.md") == ""
    assert decode_lead("", 512) is None and decode_lead(None, 512) is None
    assert decode_lead(raw, 256) is None  # another dimension: damage, not a lead
    assert decode_lead("not base64!", 512) is None


def test_restructuredtext_titles_and_directives_are_not_prose() -> None:
    """A Sphinx page (pip's `pip_check.rst`): its titles (with their `=` lines), link targets and directives are
    left out, so its lead is its title and its first real sentence; a setext title in Markdown too."""
    opening = (
        ".. _`pip check`:\n\n=========\npip check\n=========\n\n\nUsage\n=====\n\n.. tab:: Unix/macOS\n\n"
        '   .. pip-command-usage:: check "python -m pip"\n\n\nDescription\n===========\n\n'
        "Verify installed packages have compatible dependencies.\n\nExamples\n--------\n\n"
        ".. code-block:: shell\n\n   $ python -m pip check\n   No broken requirements found.\n\n"
        "\tand a line indented by a tab\n\nLast words of the page, prose again."
    )
    lead = lead_text("File: pip_check.rst | Title: pip check", [opening])
    assert lead == (
        "pip check\nVerify installed packages have compatible dependencies. Last words of the page, prose again."
    )
    setext = "Backups\n=======\n\nHow to back up a laptop.\n\nSteps\n-----\n\nOne: plug the disk in."
    assert lead_text("File: b.md", [setext]) == "How to back up a laptop. One: plug the disk in."
