"""The check at send time: a request waits in its download slot's queue after the middleware
gave it a lease (a slot's concurrency, DOWNLOAD_DELAY, AutoThrottle, a 429's rest), and the
lease can end meanwhile (the proxy was reported banned for the site or unreachable, the server
answered its renewal 404). So the add-on's download handler for http and https wraps the one
Scrapy would use and, when Scrapy hands it a request to send, fails one whose lease has ended
with ``LeaseEnded``: it is sent again with a fresh lease, as a request that never left (no
report, not a retry, not a download error: reroute.py). Nothing goes through a proxy after its
ban or its lease's end. The handler also holds a request to its lease's pace as it sends it
(send_turn.py): a slot sends what waited in it at its own spacing, not the site's."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Mapping
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object

from .lease_state import HeldLease
from .meta_keys import LEASE_KEY
from .routes import PROXIED_SCHEMES
from .send_turn import send_turn
from .settings import SettingError

#: The handler's import path, as DOWNLOAD_HANDLERS names it.
HANDLER_PATH = "proxy_operator.scrapy.DownloadHandler"
#: What a project without ADDONS sets DOWNLOAD_HANDLERS to (with the middleware in DOWNLOADER_MIDDLEWARES).
SEND_CHECK_HANDLERS = {"http": HANDLER_PATH, "https": HANDLER_PATH}
#: scheme -> the handler the add-on's wraps (the add-on keeps the project's here; by default
#: Scrapy's own, DOWNLOAD_HANDLERS_BASE).
INNER_SETTING = "PROXY_OPERATOR_DOWNLOAD_HANDLERS"


class LeaseEnded(Exception):
    """The request's lease ended while the request waited to be sent: it was not sent."""


def lease_ended(request: Request) -> HeldLease | None:
    """The ended lease the request was given, or None when it may go (no lease of the add-on,
    or one still live). Pure."""
    held = request.meta.get(LEASE_KEY)
    return held if isinstance(held, HeldLease) and held.gone else None


class DownloadHandler:
    """``DOWNLOAD_HANDLERS = {"http": "proxy_operator.scrapy.DownloadHandler", "https": ...}``
    (the add-on sets it): the check above, then the wrapped handler sends the request."""

    lazy = False

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        base: Mapping[str, Any] = crawler.settings.getdict("DOWNLOAD_HANDLERS_BASE")
        inner: Mapping[str, Any] = crawler.settings.getdict(INNER_SETTING)
        self._paths = {scheme: inner.get(scheme) or base[scheme] for scheme in PROXIED_SCHEMES}
        #: scheme -> the wrapped handler, built at its first request (Scrapy builds this one per scheme).
        self._handlers: dict[str, Any] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DownloadHandler:
        return cls(crawler)

    async def download_request(self, request: Request) -> Response:
        _check(request)
        held = request.meta.get(LEASE_KEY)
        if isinstance(held, HeldLease):
            await _turn(request, held)
        scheme = urlparse_cached(request).scheme
        handler = self._handlers.get(scheme)
        if handler is None:
            handler = self._handlers[scheme] = build_from_crawler(load_object(self._paths[scheme]), self.crawler)
        if inspect.iscoroutinefunction(handler.download_request):
            response: Response = await handler.download_request(request)
            return response
        # A handler of the older API: a Deferred, and the spider argument.
        old: Response = await maybe_deferred_to_future(handler.download_request(request, self.crawler.spider))
        return old

    async def close(self) -> None:
        for handler in self._handlers.values():
            closing = getattr(handler, "close", None)
            if closing is None:
                continue
            result = closing()
            if inspect.isawaitable(result):
                await result
            elif result is not None:
                await maybe_deferred_to_future(result)


async def _turn(request: Request, held: HeldLease) -> None:
    """Waits for the request's send turn on its lease (send_turn.py). A 429 that came while it
    waited rests the lease: it takes a turn after the rest instead. The book's clock is
    time.monotonic (middleware.py)."""
    waited = False
    while True:
        now = time.monotonic()
        rest = max(held.rest_until, held.pace.rest_until)
        if waited and rest <= now:
            return  # its turn came, and no rest began meanwhile
        turn = send_turn(held.next_send, rest, held.pace.rate, now)
        held.next_send = turn.next_send
        if turn.at <= now:
            return
        await asyncio.sleep(turn.at - now)
        _check(request)  # the lease may have ended meanwhile
        waited = True


def _check(request: Request) -> None:
    held = lease_ended(request)
    if held is not None:
        raise LeaseEnded(f"proxy-operator: {request.url}: its lease of {held.proxy_id} ended while it waited to be sent")


def check_send_handlers(settings: Any) -> None:
    """The middleware needs the check: http and https must be sent by the add-on's handler
    (ADDONS sets it; a project with the middleware in DOWNLOADER_MIDDLEWARES sets it too), or
    the start-up stops naming DOWNLOAD_HANDLERS. A scheme disabled (None) sends nothing."""
    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme in sorted(PROXIED_SCHEMES):
        path = handlers.get(scheme)
        if path is None or is_the_check(path):
            continue
        raise SettingError(
            "DOWNLOAD_HANDLERS",
            f'must send {scheme}: requests with "{HANDLER_PATH}" (ADDONS = {{"proxy_operator.scrapy.Addon": 0}} '
            f"sets it; it checks at send time that the request's lease has not ended, then hands the request "
            f"to the handler {INNER_SETTING} names for the scheme, Scrapy's own by default), got {path!r}",
        )


def is_the_check(path: Any) -> bool:
    try:
        return load_object(path) is DownloadHandler
    except (ImportError, NameError, ValueError, AttributeError):
        return False
