"""The Scrapy downloader middleware: gives each request a proxy from the crawl's leases
(``meta['proxy']``, its download slot per site and proxy), turns responses and exceptions into
reports, honours Retry-After by resting the proxy's slot (slot_timing.py), and releases everything when the
spider closes. The lease logic is in leases.py; this file translates Scrapy's events. A request
waits in its download slot after it got its lease: the check that its lease is still live when
it is sent is send_check.py's download handler, and a request it stops is sent again here
(``reroute``, called by reroute.py's middleware above DownloaderStats)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

from scrapy import Request, signals
from scrapy.core import downloader as scrapy_downloader
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.http import Response
from scrapy.utils.asyncio import is_asyncio_available

from ..client import retry_after_seconds
from ..errors import NoLease
from ..target import target_of
from .leases import HeldLease, LeaseBook, LeaseFailed
from .meta_keys import LEASE_KEY, REROUTES_KEY, RETRIES_KEY, SENT_KEY, SESSION_KEY, SLOT_KEY
from .reroute import ReroutesExhausted, check_reroute_middleware, register, reroute_verdict
from .send_check import LeaseEnded, check_send_handlers
from .routes import route_of
from .settings import SettingError, make_client, make_policy, read_settings
from .pace import rate_limited as pace_after_429
from .slot_timing import SlotClock, rested, resting
from .slots import inherit, slot_of
from .policy import BanPolicy, Policy, response_outcome

log = logging.getLogger("proxy_operator")

__all__ = ["LEASE_KEY", "RETRIES_KEY", "SENT_KEY", "SESSION_KEY", "ProxyOperatorMiddleware", "SpiderPolicy"]

#: The add-on's finish reasons: the discovery API refused the crawl (its token, a setting, the
#: URL); the add-on failed as the spider opened.
FinishReason = Literal["proxy_operator_refused", "proxy_operator_start_failed"]
STOP_REASON: FinishReason = "proxy_operator_refused"
START_FAILED: FinishReason = "proxy_operator_start_failed"


class SpiderPolicy:
    """The spider's own ``response_is_ban`` / ``exception_is_ban`` / ``response_is_rate_limit``
    where it defines them (as with scrapy-rotating-proxies), the policy's otherwise."""

    def __init__(self, spider: Any, fallback: Policy) -> None:
        self.spider, self.fallback = spider, fallback

    def response_is_ban(self, request: Request, response: Response) -> bool:
        method = getattr(self.spider, "response_is_ban", None)
        return bool(method(request, response)) if method else self.fallback.response_is_ban(request, response)

    def response_is_rate_limit(self, request: Request, response: Response) -> bool:
        method = getattr(self.spider, "response_is_rate_limit", None)
        return bool(method(request, response)) if method else self.fallback.response_is_rate_limit(request, response)

    def exception_is_ban(self, request: Request, exception: BaseException) -> bool:
        method = getattr(self.spider, "exception_is_ban", None)
        return bool(method(request, exception)) if method else self.fallback.exception_is_ban(request, exception)


class ProxyOperatorMiddleware:
    """``ADDONS = {"proxy_operator.scrapy.Addon": 0}`` with ``PROXY_OPERATOR_URL`` set (or
    ``DOWNLOADER_MIDDLEWARES = {"proxy_operator.scrapy.ProxyOperatorMiddleware": 610}`` and
    ``DOWNLOAD_HANDLERS`` naming ``proxy_operator.scrapy.DownloadHandler`` for http and https)."""

    def __init__(self, crawler: Crawler) -> None:
        # Every setting is checked here, so a bad one stops the start-up naming its key
        # (settings.py) instead of surfacing mid-crawl, or disabling the middleware.
        config = read_settings(crawler.settings)
        check_send_handlers(crawler.settings)
        check_reroute_middleware(crawler.settings)
        if not _on_asyncio():
            raise SettingError(
                "TWISTED_REACTOR",
                'must be "twisted.internet.asyncioreactor.AsyncioSelectorReactor" (the default since Scrapy '
                "2.13): proxy_operator.scrapy calls the discovery API on asyncio",
            )
        self.crawler = crawler
        self.url, self.token = config.url, config.token
        self.options = config.options
        self.retry_times = config.retry_times
        self.max_reroutes = config.max_reroutes
        self.client: Any = make_client(config)
        self._policy = make_policy(config)
        self.book: LeaseBook | None = None
        #: Why the add-on cannot lease (every request it would proxy is then refused).
        self.failure: str | None = None
        self.policy: Policy = BanPolicy()
        self._ticker: asyncio.Task[None] | None = None
        self._closing: asyncio.Future[Any] | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        register(crawler, self)  # RerouteMiddleware hands this middleware the requests the check stopped

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyOperatorMiddleware:
        return cls(crawler)

    async def spider_opened(self) -> None:
        try:
            self.book = LeaseBook(self.client, self.options, time.monotonic)
            self.policy = SpiderPolicy(self.crawler.spider, self._policy)
            self._ticker = asyncio.ensure_future(self._tick())
        except Exception as err:
            # Scrapy logs a signal handler's exception and crawls on: CloseSpider ends the crawl,
            # and until it has, process_request refuses every request (no book, no proxy).
            self.failure = f"the add-on did not start: {type(err).__name__}: {err}"
            log.error("proxy-operator: %s; the spider closes", self.failure)
            raise CloseSpider(START_FAILED) from err

    async def _tick(self) -> None:
        while self.book is not None:
            await asyncio.sleep(self.book.tick_seconds)
            self.book.tick()

    async def spider_closed(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        if self.book is not None:
            await self.book.close()
            stats = self.crawler.stats
            if stats is not None:
                for name, value in vars(self.book.stats).items():
                    stats.set_value(f"proxy_operator/{name}", value)
        await self.client.aclose()

    # -- Scrapy's downloader middleware methods (current signatures: no spider argument) --------

    async def process_request(self, request: Request) -> None:
        meta = request.meta
        if isinstance(meta.get(LEASE_KEY), HeldLease):
            # A copy of a request that went through a lease (RetryMiddleware copies meta): that
            # lease heard its outcome already, so a failure now must not count it down again.
            # It was sent: its re-routes (the cap counts those in a row, unsent) start again.
            for key in (LEASE_KEY, SENT_KEY, REROUTES_KEY, "proxy", "download_slot"):
                meta.pop(key, None)
        if meta.get("dont_proxy"):
            return None  # the documented opt-out
        if meta.get("proxy") and LEASE_KEY not in meta:
            return None  # a proxy the spider chose itself
        # meta['proxy'] None or "" is Scrapy's "no proxy from the environment", not an opt-out
        # of the add-on (dont_proxy is): it was sent without a proxy; it is leased like any other.
        route = route_of(request.url)
        if route == "local":
            return None  # data: and file: never touch the network: nothing to proxy
        if route == "refuse":
            # Scrapy's FTP/S3/... handlers ignore meta['proxy']: a lease would be a direct request.
            self._inc("proxy_operator/refused_scheme")
            scheme = request.url.split(":", 1)[0]
            raise IgnoreRequest(
                f"proxy-operator: {request.url}: a proxy cannot carry {scheme}: requests (Scrapy sends them "
                "directly, whatever meta['proxy'] says); meta['dont_proxy'] = True sends one without a proxy"
            )
        if self.book is None:
            # Never out without a proxy: the add-on is meant to proxy this request and cannot.
            self._inc("proxy_operator/not_started")
            why = self.failure or "the spider has not opened (spider_opened did not run)"
            raise IgnoreRequest(f"proxy-operator: no proxy for {request.url}: {why}")
        try:
            host = target_of(request.url)
        except ValueError as err:
            raise IgnoreRequest(f"proxy-operator: {request.url}: {err}") from err  # http(s) without a host
        session = meta.get(SESSION_KEY)
        try:
            held = await self.book.acquire(host, session)
        except NoLease as err:
            self._inc("proxy_operator/no_lease")
            raise IgnoreRequest(f"no proxy leased for {host}: {err.code}") from err
        except LeaseFailed as err:
            self._inc(f"proxy_operator/lease_failed/{err.verdict}")
            if err.verdict == "stop":
                self._stop(err.reason)
            raise IgnoreRequest(f"proxy-operator: no proxy for {request.url}: {err.reason}") from err
        meta["proxy"] = held.lease.proxy_url
        meta[LEASE_KEY] = held
        meta[SENT_KEY] = self.book.clock()
        if meta.get("download_slot") is not None:
            meta.setdefault(SLOT_KEY, meta["download_slot"])  # the spider's own slot
        base = str(meta.get(SLOT_KEY) or host)
        meta["download_slot"] = slot_of(base, held.proxy_id)
        self._inherit_slot_settings(base, meta["download_slot"])
        return None

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        held = request.meta.get(LEASE_KEY)
        if not isinstance(held, HeldLease) or self.book is None:
            return response
        if "cached" in response.flags:
            # HttpCacheMiddleware's stored answer (HTTPCACHE_ENABLED): nothing went through the
            # proxy, so it says nothing of it. Before, a cached 403 was reported as a ban of
            # whichever proxy the request had been given.
            self.book.finished(held)
            self._inc("proxy_operator/cached")
            return response
        outcome = response_outcome(self.policy, request, response)
        if outcome == "ok":
            self.book.succeeded(held, request.meta.get(SENT_KEY))
            return response
        if outcome == "banned":
            self._inc("proxy_operator/banned")
            self.book.banned(held)  # out of use at once; reported in the background
            return self._retry(request, "banned")
        if outcome == "rate_limited":
            self._inc("proxy_operator/rate_limited")
            rest = self.book.rate_limited(held, _retry_after(response), request.meta.get(SENT_KEY))
            self._rest(request, rest)
            return self._retry(request, "rate_limited")
        self.book.finished(held)
        return response

    def response_downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        """Scrapy's downloader looks at a slot's queue as soon as an answer is in, before the
        middlewares see it: a slot whose transfers were full would send its next request at the
        429 itself. So the slot starts its rest here, as long as the rest process_response will
        take (the same pure rule on the same pace; the book learns from the 429 there)."""
        held = request.meta.get(LEASE_KEY)
        if not isinstance(held, HeldLease) or self.book is None or "cached" in response.flags:
            return
        if response_outcome(self.policy, request, response) != "rate_limited":
            return
        now = self.book.clock()
        sent = request.meta.get(SENT_KEY)
        self._rest(request, pace_after_429(held.pace, now, now if sent is None else sent, _retry_after(response)).rest)

    async def process_exception(self, request: Request, exception: Exception) -> Request | None:
        held = request.meta.get(LEASE_KEY)
        if not isinstance(held, HeldLease) or self.book is None:
            return None
        if isinstance(exception, LeaseEnded):
            return self.reroute(request)  # RerouteMiddleware (990) normally has it first
        if not self.policy.exception_is_ban(request, exception):
            self.book.finished(held)
            return None  # RetryMiddleware decides: the proxy is not to blame
        self._inc("proxy_operator/unreachable")
        self.book.unreachable(held)
        return self._retry(request, "unreachable")

    def reroute(self, request: Request) -> Request:
        """A request whose lease ended while it waited in its download slot (send_check.py) never
        left: sent again with a fresh lease (no report, not a retry), at most
        PROXY_OPERATOR_MAX_REROUTES times; then it fails (ReroutesExhausted), never sent direct."""
        held = request.meta.get(LEASE_KEY)
        if isinstance(held, HeldLease) and self.book is not None:
            self.book.rerouted(held)
        done = int(request.meta.get(REROUTES_KEY, 0))
        if reroute_verdict(done, self.max_reroutes) == "give_up":
            self._inc("proxy_operator/reroute/max_reached")
            message = (
                f"proxy-operator: {request.url}: not sent: its lease ended before it could be sent "
                f"{done + 1} times (PROXY_OPERATOR_MAX_REROUTES = {self.max_reroutes}); it never went without a proxy"
            )
            log.warning("%s", message)
            raise ReroutesExhausted(message)
        self._inc("proxy_operator/rerouted")
        again = self._without_lease(request.replace(dont_filter=True))
        again.meta[REROUTES_KEY] = done + 1
        return again

    # -- helpers -------------------------------------------------------------------------------

    def _stop(self, reason: str) -> None:
        """No lease can come (the token or a setting refused): the spider closes, naming it."""
        if self.failure is not None:
            return
        self.failure = reason
        log.error("proxy-operator: %s; the spider closes", reason)
        try:
            engine: Any = self.crawler.engine
        except RuntimeError:  # Scrapy 2.19: no engine before the crawl starts (a test's crawler)
            return
        if engine is None:
            return
        closer = getattr(engine, "close_spider_async", None)  # Scrapy 2.14+
        if closer is not None:
            self._closing = asyncio.ensure_future(closer(reason=STOP_REASON))  # kept: a task is weakly held
        else:
            engine.close_spider(self.crawler.spider, STOP_REASON)

    def _retry(self, request: Request, why: str) -> Request:
        tries = int(request.meta.get(RETRIES_KEY, 0)) + 1
        if tries > self.retry_times:
            self._inc("proxy_operator/retries_exhausted")
            # A banned answer never reaches the spider's callback as a page.
            raise IgnoreRequest(f"{request.url}: {why} through {tries - 1} proxies")
        retry = self._without_lease(request.replace(dont_filter=True))
        retry.meta[RETRIES_KEY] = tries
        retry.meta.pop(REROUTES_KEY, None)  # it was sent: the cap counts re-routes in a row
        self._inc(f"proxy_operator/retry/{why}")
        return retry

    @staticmethod
    def _without_lease(request: Request) -> Request:
        for key in ("proxy", "download_slot", LEASE_KEY, SENT_KEY):
            request.meta.pop(key, None)
        return request

    def _inherit_slot_settings(self, base: str, key: str) -> None:
        try:
            engine: Any = self.crawler.engine
        except RuntimeError:  # no engine (a test's crawler): no slots either
            return
        per_slot = getattr(getattr(engine, "downloader", None), "per_slot_settings", None)
        if isinstance(per_slot, dict):
            inherit(per_slot, base, key)

    def _slot(self, request: Request) -> Any:
        try:
            engine: Any = self.crawler.engine
        except RuntimeError:  # no engine (a test's crawler): no slots either
            return None
        key = request.meta.get("download_slot")
        if engine is None or key is None:
            return None
        return engine.downloader.slots.get(key)

    def _rest(self, request: Request, seconds: float) -> None:
        """The proxy's slot sends nothing (the requests already queued on it included) before
        ``seconds`` from now, then keeps its own delay (slot_timing.py: the rest is on the
        slot's clock, so AutoThrottle's delay neither cuts it nor is overwritten by it). The
        pace is the book's: it gives the proxy no more requests than the site allowed."""
        slot = self._slot(request)
        if slot is None:
            return
        rest = resting(SlotClock(slot.lastseen, slot.delay), _slot_clock(), seconds)
        slot.lastseen = rest.lastseen
        if rest.delay != slot.delay:
            slot.delay = rest.delay
            asyncio.get_running_loop().call_later(max(seconds, 0.0), self._rested, slot)

    def _rested(self, slot: Any) -> None:
        now = _slot_clock()
        if slot.lastseen > now:  # a later 429 moved the rest's end
            asyncio.get_running_loop().call_later(slot.lastseen - now, self._rested, slot)
            return
        delay = rested(SlotClock(slot.lastseen, slot.delay), now)
        if delay is not None:
            slot.delay = delay

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)


def _on_asyncio() -> bool:
    try:
        return is_asyncio_available()
    except RuntimeError:
        return True  # no reactor installed: Scrapy's reactorless mode, which runs on asyncio


def _slot_clock() -> float:
    """Now on the clock Scrapy's downloader keeps ``slot.lastseen`` on (``time.monotonic`` in
    Scrapy 2.19)."""
    clock = getattr(scrapy_downloader, "monotonic", None) or getattr(scrapy_downloader, "time", None)
    return float(clock()) if callable(clock) else time.monotonic()


def _retry_after(response: Response) -> float | None:
    raw = response.headers.get("Retry-After")
    return retry_after_seconds(raw.decode("latin-1") if raw else None)
