"""The web page's pure parts: the gate's refusals and visitors (web/guard.py), the marks of a query's words
(web/highlight.py), the throughput series and the time left (web/throughput.py)."""

from __future__ import annotations

import pytest
from markupsafe import Markup

from ragd import access
from ragd.access.tokens import Tokens
from ragd.web import highlight
from ragd.web.guard import Gate, cookie_of
from ragd.web.throughput import PERIOD_S, Sample, Throughput, chart

HOSTS = ("127.0.0.1:8739", "localhost:8739")
ORIGINS = ("http://127.0.0.1:8739", "http://localhost:8739")


def gate(tokens: Tokens) -> Gate:
    return Gate(tokens, HOSTS, ORIGINS)


# -- the gate ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "host", "origin", "site", "status"),
    [
        ("GET", "127.0.0.1:8739", None, None, None),
        ("GET", "localhost:8739", "http://localhost:8739", None, None),
        ("GET", "evil.example:8739", None, None, 421),  # DNS rebinding
        ("GET", None, None, None, 421),
        ("GET", "127.0.0.1:8739", "http://evil.example", None, 403),
        ("GET", "127.0.0.1:8739", "null", None, 403),  # a sandboxed page
        ("POST", "127.0.0.1:8739", None, None, 403),  # a form of unknown origin
        ("POST", "127.0.0.1:8739", None, "same-origin", None),
        ("POST", "127.0.0.1:8739", None, "cross-site", 403),
        ("POST", "127.0.0.1:8739", "http://127.0.0.1:8739", None, None),
        ("POST", "127.0.0.1:8739", "http://127.0.0.1:9999", None, 403),  # another port is another site
    ],
)
def test_refusals(
    method: str, host: str | None, origin: str | None, site: str | None, status: int | None
) -> None:
    refused = gate(Tokens()).refusal(method, host, origin, site)
    assert (refused[0] if refused else None) == status


def test_without_tokens_everyone_is_the_owner_and_no_sign_in_is_offered() -> None:
    visitor = gate(Tokens()).by_cookie(None)
    assert visitor is not None and visitor.caller.full and not visitor.signed_in and not visitor.can_sign_in
    assert gate(Tokens()).by_token("anything") is None


def test_the_cookie_of_a_token_stands_for_its_caller_and_shows_nothing_of_it() -> None:
    g = gate(Tokens(own=b"own-token", users=((b"nobody-token", "nobody"),), without="refuse"))
    assert g.by_cookie(None) is None and g.by_cookie("") is None  # the sign-in page
    owner, cookie = g.by_token(" own-token ") or pytest.fail("the own token")
    assert (
        owner.caller.full
        and owner.signed_in
        and "own-token" not in cookie
        and cookie == cookie_of(b"own-token")
    )
    assert (g.by_cookie(cookie) or pytest.fail("the cookie")).caller.full
    user, user_cookie = g.by_token("nobody-token") or pytest.fail("a user's token")
    assert not user.caller.full and user.caller.name == "nobody"
    again = g.by_cookie(user_cookie)
    assert again is not None and again.caller.name == "nobody" and again.signed_in
    assert g.by_cookie(cookie_of(b"another")) is None and g.by_cookie("0" * 64) is None
    assert g.by_token("wrong") is None and g.by_token("") is None


def test_a_visitor_without_a_token_may_be_anybody() -> None:
    visitor = gate(Tokens(own=b"t", without="public")).by_cookie("not-a-cookie")
    assert visitor is not None and visitor.caller == access.PUBLIC and not visitor.signed_in
    assert "every local user" in visitor.who


# -- marks ------------------------------------------------------------------------------------------------------
def test_english_words_are_marked_whole_whatever_their_case() -> None:
    text = "Set HTTP_PROXY first; the proxy (not proxying) is used."
    assert str(highlight.marked(text, "proxy")) == (
        "Set HTTP_PROXY first; the <mark>proxy</mark> (not proxying) is used."
    )
    assert "<mark>HTTP_PROXY</mark>" in highlight.marked(text, "http_proxy")


def test_the_text_is_escaped_and_marks_are_the_only_markup() -> None:
    out = highlight.marked('<script>alert("x")</script> alert', "alert")
    assert isinstance(out, Markup)
    assert str(out) == "&lt;script&gt;<mark>alert</mark>(&#34;x&#34;)&lt;/script&gt; <mark>alert</mark>"


def test_chinese_questions_mark_the_pairs_of_their_characters_the_text_holds() -> None:
    out = str(highlight.marked("本文档介绍如何配置代理服务器。", "怎样配置代理"))
    assert "<mark>配置代理</mark>" in out and "怎样" not in out
    assert str(highlight.marked("的是在", "的是")) == "的是在"  # filler words alone are not marked
    assert (
        str(highlight.marked("重启路由器即可", "路由器")) == "重启<mark>路由器</mark>即可"
    )  # 路由 and 由器 overlap


def test_a_question_of_nothing_markable_marks_nothing() -> None:
    assert highlight.pattern("") is None
    assert str(highlight.marked("a & b", "   ")) == "a &amp; b"


def test_an_excerpt_of_a_long_chunk_is_taken_around_its_first_match() -> None:
    text = ("lorem ipsum " * 100) + "the needle is here " + ("dolor sit " * 100)
    out = str(highlight.excerpt(text, "needle", size=120))
    assert "<mark>needle</mark>" in out and out.startswith("… ") and out.endswith(" …")
    assert len(out) < 200
    short = str(highlight.excerpt("a\n\n\n\nb needle", "needle"))
    assert short == "a\nb <mark>needle</mark>"  # blank lines folded


# -- throughput -------------------------------------------------------------------------------------------------
def filled(*points: tuple[float, int, int, int]) -> Throughput:
    """A Throughput holding samples (at, texts, dirs_done, files_done), all of one phase."""
    thr = Throughput(lambda: pytest.fail("no agent here"))  # type: ignore[arg-type,return-value]
    for at, texts, dirs, files in points:
        thr.record(Sample(at, texts, 1, dirs, files))
    return thr


def test_series_are_rates_per_interval() -> None:
    thr = filled((100.0, 0, 0, 0), (102.0, 50, 1, 4), (104.0, 50, 2, 10))
    assert thr.series() == [
        {"at": 102.0, "texts_per_s": 25.0, "files_per_s": 2.0},
        {"at": 104.0, "texts_per_s": 0.0, "files_per_s": 3.0},
    ]


def test_a_new_phase_counts_its_files_from_zero() -> None:
    thr = filled((100.0, 0, 5, 50))
    thr.record(Sample(102.0, 0, 2, 1, 4))  # phase 2: one directory, four files so far
    assert thr.series()[-1]["files_per_s"] == 2.0


def test_time_left_is_told_from_the_recent_pace_only_when_it_can_be() -> None:
    thr = filled(*((100.0 + i * PERIOD_S, 0, i, 0) for i in range(11)))  # a directory per sample
    assert thr.time_left(dirs_total=30, dirs_done=10) == pytest.approx(20 * PERIOD_S)
    assert thr.time_left(dirs_total=10, dirs_done=10) is None
    assert filled((100.0, 0, 3, 0), (102.0, 0, 3, 0)).time_left(10, 3) is None  # no progress: no guess
    assert filled((100.0, 0, 0, 0)).time_left(10, 0) is None


def test_the_embedder_is_failing_while_it_failed_a_batch_lately() -> None:
    thr = filled((100.0, 0, 0, 0))
    thr.record(Sample(200.0, 0, 1, 0, 0, errors=3))
    thr.record(Sample(700.0, 50, 1, 0, 0, errors=3))
    assert thr.errors_since(600) == 3 and thr.errors_since(300) == 0
    assert filled().errors_since(300) == 0


def test_the_chart_puts_the_newest_at_the_right_and_scales_to_the_peak() -> None:
    series = [{"at": 0.0, "v": 5.0}, {"at": 600.0, "v": 10.0}]
    drawn = chart(series, "v", width=600, height=80)
    assert drawn["peak"] == 10.0 and drawn["last"] == 10.0
    first, last = drawn["points"].split()
    assert first.startswith("0.0,") and last == "600.0,2.0"
    assert chart([], "v")["points"] == ""
