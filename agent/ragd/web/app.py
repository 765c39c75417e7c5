"""The web page's routes (docs/web.md), a Starlette app served beside MCP on the agent's loopback endpoint.

Every request first passes the gate (Host, Origin), then is answered as its visitor (guard.Visitor): the data of
each view comes from `pages`, run in a worker thread as that visitor's caller, and is rendered server-side from
`templates/`; `static/ragd.js` only follows the live overview (server-sent events of its rendered part) and
offers a few keys. Every answer carries guard.HEADERS.
"""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode

import jinja2
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from ragctl import protocol as p

from .. import access
from ..errors import RagdError
from ..verbs.arguments import describe
from . import highlight, pages
from .guard import COOKIE, HEADERS, RAW_CSP, RAW_PLAIN_CSP, SCRIPTABLE, Gate, Visitor
from .throughput import Throughput

if TYPE_CHECKING:
    from ..verbs.runtime import Resident

T = TypeVar("T")
HERE = Path(__file__).parent
PREFIX = "/ui"
LIVE_PERIOD_S = 1.0  # how often the live overview is sent
STATUS_OF = {p.NOT_FOUND: 404, p.BAD_REQUEST: 400, p.FORBIDDEN: 403, p.UNAVAILABLE: 503, p.TIMEOUT: 504}
COOKIE_MAX_AGE = 30 * 86400  # a month; `ragctl ui` gives a new link


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.ChainableUndefined)  # fmt: skip
    env.filters.update(when=pages.when, duration=pages.duration, marked=highlight.marked,
                       excerpt=highlight.excerpt)  # fmt: skip
    env.globals.update(prefix=PREFIX, url=_url)
    return env


def _url(view: str, /, **params: Any) -> str:
    """The address of view `view` ("/doc") with query `params` (those empty left out)."""
    kept = {k: v for k, v in params.items() if v is not None and v is not False and v != ""}
    return f"{PREFIX}{view}" + (f"?{urlencode(kept, doseq=True)}" if kept else "")


class WebPage:
    """The ASGI app of the page: the gate, the headers, the routes."""

    def __init__(self, get_rt: Callable[[], Resident], gate: Gate, throughput: Throughput) -> None:
        self.get_rt = get_rt
        self.gate = gate
        self.throughput = throughput
        self.env = environment()
        self.app = Starlette(routes=[
            Route("/", self.root), Route(PREFIX, self.root), Route("/favicon.ico", self.icon),
            Route(f"{PREFIX}/", self.overview), Route(f"{PREFIX}/live", self.live),
            Route(f"{PREFIX}/failures", self.failures), Route(f"{PREFIX}/retry", self.retry, methods=["POST"]),
            Route(f"{PREFIX}/search", self.search), Route(f"{PREFIX}/doc", self.document),
            Route(f"{PREFIX}/raw", self.raw), Route(f"{PREFIX}/changes", self.changes),
            Route(f"{PREFIX}/login", self.login, methods=["GET", "POST"]),
            Route(f"{PREFIX}/logout", self.logout, methods=["POST"]),
            Mount(f"{PREFIX}/static", StaticFiles(directory=HERE / "static"), name="static"),
        ])  # fmt: skip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
        refused = self.gate.refusal(scope["method"], headers.get("host"), headers.get("origin"),
                                    headers.get("sec-fetch-site"))  # fmt: skip
        if refused is not None:
            status, why = refused
            return await Response(why + "\n", status, media_type="text/plain")(scope, receive, _secured(send))
        await self.app(scope, receive, _secured(send))

    # -- visitors -------------------------------------------------------------------------------------------------
    def visitor(self, request: Request) -> Visitor | None:
        return self.gate.by_cookie(request.cookies.get(COOKIE))

    def _sign_in_first(self, request: Request) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(_url("/login", next=target), 303)

    def _token_link(self, request: Request) -> Response | None:
        """A `?token=` link: the cookie set and the same page again without the token in its address."""
        token = request.query_params.get("token")
        if token is None:
            return None
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        signed = self.gate.by_token(token)
        if signed is None:
            return self.render(request, "login.html", None, status=401, next=target,
                               error="That link's token is not one this agent accepts (it may have changed): "
                                     "ask `ragctl ui` for a new link, or sign in with the token.")  # fmt: skip
        response = RedirectResponse(target, 303)
        _set_cookie(response, signed[1])
        return response

    async def _as(self, visitor: Visitor, fn: Callable[..., T], *args: Any) -> T:
        def call() -> T:
            with access.acting_as(visitor.caller):
                return fn(self.get_rt(), *args)

        return await run_in_threadpool(call)

    def render(self, request: Request, name: str, visitor: Visitor | None, status: int = 200,
               **context: Any) -> HTMLResponse:  # fmt: skip
        html = self.env.get_template(name).render(request=request, visitor=visitor, page=name.split(".")[0],
                                                  **context)  # fmt: skip
        return HTMLResponse(html, status, headers={"cache-control": "no-store"})

    def failed(self, request: Request, visitor: Visitor, err: RagdError, **context: Any) -> HTMLResponse:
        """The error page of a domain error: its message and hint, with the HTTP status of its code."""
        return self.render(request, "error.html", visitor, status=STATUS_OF.get(err.code, 500),
                           message=err.message, hint=err.hint, **context)  # fmt: skip

    async def _page(self, request: Request, name: str, fn: Callable[..., Any], *args: Any,
                    **context: Any) -> Response:  # fmt: skip
        """A view: the visitor (else the sign-in page), `fn`'s data as `data`, and an error page for RagdError."""
        found = self._token_link(request)
        if found is not None:
            return found
        visitor = self.visitor(request)
        if visitor is None:
            return self._sign_in_first(request)
        try:
            data = await self._as(visitor, fn, *args)
        except RagdError as err:
            return self.failed(request, visitor, err, **context)
        except ValidationError as err:
            return self.render(request, "error.html", visitor, status=400, message=describe(err), hint="",
                               **context)  # fmt: skip
        return self.render(request, name, visitor, data=data, **context)

    # -- views ----------------------------------------------------------------------------------------------------
    async def root(self, request: Request) -> Response:
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"{PREFIX}/{query}", 307)

    async def icon(self, request: Request) -> Response:
        return FileResponse(HERE / "static" / "ragd.svg", media_type="image/svg+xml")

    async def overview(self, request: Request) -> Response:
        return await self._page(request, "overview.html", pages.overview, self.throughput)

    async def live(self, request: Request) -> Response:
        """Server-sent events: the overview's live part, rendered, every LIVE_PERIOD_S until the page goes away or
        the agent stops."""
        visitor = self.visitor(request)
        if visitor is None:
            return Response("sign in first\n", 401, media_type="text/plain")
        template = self.env.get_template("overview_live.html")

        async def events() -> AsyncIterator[str]:
            while not self.get_rt().host.stopping():
                data = await self._as(visitor, pages.overview, self.throughput)
                html = template.render(data=data, visitor=visitor)
                yield "event: overview\n" + "".join(f"data: {line}\n" for line in html.splitlines()) + "\n"
                await asyncio.sleep(LIVE_PERIOD_S)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})  # fmt: skip

    async def failures(self, request: Request) -> Response:
        q = request.query_params
        return await self._page(request, "failures.html", pages.problems, q.get("state", ""), q.get("q", ""),
                                q.get("root", ""), retried=q.get("retried"), scheduled=q.get("scheduled"))  # fmt: skip

    async def retry(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if visitor is None:
            return self._sign_in_first(request)
        form = await request.form()
        path, back = str(form.get("path", "")), str(form.get("back", ""))
        try:
            done = await self._as(visitor, pages.retry, path)
        except RagdError as err:
            return self.failed(request, visitor, err)
        target = back if back.startswith(f"{PREFIX}/") and "//" not in back else _url("/failures")
        sep = "&" if "?" in target else "?"
        return RedirectResponse(
            f"{target}{sep}{urlencode({'retried': path, 'scheduled': done['scheduled']})}", 303
        )

    async def search(self, request: Request) -> Response:
        q = request.query_params
        text, mode = q.get("q", ""), q.get("mode", "hybrid")
        # `?k=` and `?path=`: the older names, accepted for a version (SearchQuery logs their use)
        count = "k" if "k" in q and "top_k" not in q else "top_k"
        under = "path" if "path" in q and "path_prefix" not in q else "path_prefix"
        k_text, path = q.get(count, str(p.TOP_K)), q.get(under, "")
        where_text, files = q.get("where", ""), q.get("files") == "1"
        explain = q.get("explain") == "1"
        form = {"q": text, "mode": mode, "top_k": k_text, "path_prefix": path, "where": where_text,
                "files": files, "explain": explain, "default_top_k": str(p.TOP_K)}  # fmt: skip
        if not text.strip():
            return await self._page(request, "search.html", _nothing, form=form, modes=pages.SEARCH_MODES)
        try:
            k: int | str = int(k_text)
        except ValueError:
            k = k_text  # refused by SearchQuery with its own message
        asked = {"query": text, "mode": mode, count: k, **({under: [path]} if path else {}), "files": files,
                 "where": [w.strip() for w in where_text.split(",") if w.strip()], "explain": explain}  # fmt: skip
        return await self._page(request, "search.html", pages.search, asked, form=form,
                                modes=pages.SEARCH_MODES)  # fmt: skip

    async def document(self, request: Request) -> Response:
        q = request.query_params
        path, chunk, start = q.get("path", ""), _number(q.get("chunk")), _number(q.get("start"))
        return await self._page(request, "document.html", pages.document, path, chunk, start, query=q.get("q", ""),
                                chunk=chunk)  # fmt: skip

    async def raw(self, request: Request) -> Response:
        visitor = self.visitor(request)
        if visitor is None:
            return self._sign_in_first(request)
        try:
            path = await self._as(visitor, pages.raw_file, request.query_params.get("path", ""))
        except RagdError as err:
            return self.failed(request, visitor, err)
        kind = _media_type(path)
        csp = RAW_CSP if kind.split(";")[0] in SCRIPTABLE else RAW_PLAIN_CSP
        headers = {"content-security-policy": csp, "cache-control": "no-store"}
        return FileResponse(path, media_type=kind, headers=headers, filename=path.name,
                            content_disposition_type="inline")  # fmt: skip

    async def changes(self, request: Request) -> Response:
        q = request.query_params
        try:
            hours = float(q.get("hours", "24"))
        except ValueError:
            hours = 24.0
        hours = min(max(hours, 0.01), 24 * 366)
        return await self._page(
            request, "changes.html", pages.changes, hours, q.get("kind", ""), q.get("path", "")
        )

    # -- signing in -----------------------------------------------------------------------------------------------
    async def login(self, request: Request) -> Response:
        target = request.query_params.get("next", "")
        if request.method == "GET":
            return self.render(request, "login.html", self.visitor(request), next=target, error="")
        form = await request.form()
        target = str(form.get("next", ""))
        signed = self.gate.by_token(str(form.get("token", "")))
        if signed is None:
            return self.render(request, "login.html", None, status=401, next=target,
                               error="That is not a token this agent accepts.")  # fmt: skip
        safe = target if target.startswith(f"{PREFIX}/") and "//" not in target else f"{PREFIX}/"
        response = RedirectResponse(safe, 303)
        _set_cookie(response, signed[1])
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse(_url("/login"), 303)
        response.delete_cookie(COOKIE, path=f"{PREFIX}/", httponly=True, samesite="strict")
        return response


def _number(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) < 10 else None


def _media_type(path: Path) -> str:
    """What a user's file is served as: its type by name; text the page can show (Markdown, reST, CSV, code, and
    files named like README with no known extension) as text/plain, with the encoding it is in."""
    kind = mimetypes.guess_type(path.name)[0]
    try:
        with path.open("rb") as f:
            head = f.read(8192)
    except OSError:
        head = b""
    if kind is None:
        kind = "text/plain" if head and b"\0" not in head else "application/octet-stream"
    elif kind.startswith("text/") and kind not in SCRIPTABLE:
        kind = "text/plain"
    if kind.startswith("text/") or kind in ("application/json", "application/xml"):
        kind += f"; charset={_charset(head)}"
    return kind


def _charset(head: bytes) -> str:
    """UTF-8, or the legacy encoding (GBK, Big5, Shift-JIS...) the start of a text file is in."""
    try:
        head.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as err:
        if err.start >= len(head) - 4:  # a character cut at the end of the block
            return "utf-8"
    import charset_normalizer

    best = charset_normalizer.from_bytes(head).best()
    return best.encoding if best is not None else "utf-8"


def _nothing(rt: Resident) -> None:
    rt.ready()


def _set_cookie(response: Response, value: str) -> None:
    response.set_cookie(
        COOKIE, value, max_age=COOKIE_MAX_AGE, path=f"{PREFIX}/", httponly=True, samesite="strict"
    )


def _secured(send: Send) -> Send:
    """`send` with guard.HEADERS added to the response (a header the route set itself is kept)."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            have = {k.lower() for k, _ in message.get("headers", [])}
            extra = [(k.encode(), v.encode()) for k, v in HEADERS.items() if k.encode() not in have]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return wrapped
