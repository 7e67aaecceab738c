"""The Scrapy downloader middleware: gives each request a proxy from the crawl's leases
(``meta['proxy']``, its download slot per site and proxy), turns responses and exceptions into
reports, honours Retry-After by delaying the proxy's slot, and releases everything when the
spider closes. The lease logic is in leases.py; this file translates Scrapy's events."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.utils.asyncio import is_asyncio_available
from scrapy.utils.misc import load_object

from ..client import AsyncDiscoveryClient, retry_after_seconds
from ..errors import NoLease
from ..target import target_of
from .leases import BookOptions, HeldLease, LeaseBook
from .pace import rest_delay
from .policy import BanPolicy, Policy, response_outcome

log = logging.getLogger("proxy_operator")

#: The request meta keys this middleware reads or writes.
LEASE_KEY = "proxy_operator_lease"
RETRIES_KEY = "proxy_operator_retries"
SESSION_KEY = "proxy_operator_session"


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
    """``DOWNLOADER_MIDDLEWARES = {"proxy_operator.scrapy.ProxyOperatorMiddleware": 610}``
    (or ``ADDONS = {"proxy_operator.scrapy.Addon": 0}``), with ``PROXY_OPERATOR_URL`` set."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.url = settings.get("PROXY_OPERATOR_URL")
        if not self.url:
            raise NotConfigured("PROXY_OPERATOR_URL is not set (the discovery API's URL)")
        self.token = settings.get("PROXY_OPERATOR_TOKEN") or None
        client_class = settings.get("PROXY_OPERATOR_CLIENT", AsyncDiscoveryClient)
        self.client_class = load_object(client_class) if isinstance(client_class, str) else client_class
        policy_class = settings.get("PROXY_OPERATOR_BAN_POLICY", BanPolicy)
        self.policy_class = load_object(policy_class) if isinstance(policy_class, str) else policy_class
        self.options = BookOptions(
            selector=dict(settings.getdict("PROXY_OPERATOR_SELECTOR")),
            ttl_seconds=settings.getint("PROXY_OPERATOR_TTL", 120),
            requests_per_lease=settings.getint("PROXY_OPERATOR_REQUESTS_PER_LEASE", 2),
            max_leases_per_site=settings.getint("PROXY_OPERATOR_MAX_LEASES_PER_SITE", 32),
            max_wait_seconds=settings.getfloat("PROXY_OPERATOR_MAX_WAIT", 60.0),
            ok_report_interval_seconds=settings.getfloat("PROXY_OPERATOR_OK_REPORT_INTERVAL", 30.0),
        )
        self.retry_times = settings.getint("PROXY_OPERATOR_RETRY_TIMES", 10)
        self.book: LeaseBook | None = None
        self.client: Any = None
        self.policy: Policy = BanPolicy()
        self._ticker: asyncio.Task[None] | None = None
        #: Each slot's delay before a rest or a pace changed it.
        self._base_delays: dict[str, float] = {}
        #: Slots resting out a Retry-After: a pace change waits for the rest's end.
        self._resting: set[str] = set()
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyOperatorMiddleware:
        return cls(crawler)

    async def spider_opened(self) -> None:
        if not is_asyncio_available():
            raise RuntimeError(
                "proxy_operator.scrapy needs Scrapy's asyncio reactor (TWISTED_REACTOR = "
                '"twisted.internet.asyncioreactor.AsyncioSelectorReactor", the default since Scrapy 2.13)'
            )
        self.client = self.client_class(self.url, token=self.token)
        self.book = LeaseBook(self.client, self.options, time.monotonic)
        self.policy = SpiderPolicy(self.crawler.spider, self.policy_class())
        self._ticker = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            if self.book is not None:
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
        if self.client is not None:
            await self.client.aclose()

    # -- Scrapy's downloader middleware methods (current signatures: no spider argument) --------

    async def process_request(self, request: Request) -> None:
        meta = request.meta
        if meta.get("dont_proxy") or self.book is None:
            return None
        if "proxy" in meta and LEASE_KEY not in meta:
            return None  # a proxy the spider chose itself
        try:
            host = target_of(request.url)
        except ValueError:
            return None  # data:, file: and the like go nowhere near a proxy
        session = meta.get(SESSION_KEY)
        try:
            held = await self.book.acquire(host, session)
        except NoLease as err:
            self._inc("proxy_operator/no_lease")
            raise IgnoreRequest(f"no proxy leased for {host}: {err.code}") from err
        meta["proxy"] = held.lease.proxy_url
        meta[LEASE_KEY] = held
        meta["download_slot"] = f"{host}@{held.proxy_id}"
        if held.pace.delay() > 0:
            self._set_pace(request, held.pace.delay())
        return None

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        held = request.meta.get(LEASE_KEY)
        if not isinstance(held, HeldLease) or self.book is None:
            return response
        outcome = response_outcome(self.policy, request, response)
        if outcome == "ok":
            pace = self.book.succeeded(held)
            if pace is not None:
                self._set_pace(request, pace)
            return response
        if outcome == "banned":
            self._inc("proxy_operator/banned")
            await self.book.banned(held)
            return self._retry(request, "banned")
        if outcome == "rate_limited":
            self._inc("proxy_operator/rate_limited")
            raw = response.headers.get("Retry-After")
            after = retry_after_seconds(raw.decode("latin-1") if raw else None) or 1.0
            pace = self.book.rate_limited(held, after)
            self._rest(request, after, pace)
            return self._retry(request, "rate_limited")
        self.book.finished(held)
        return response

    async def process_exception(self, request: Request, exception: Exception) -> Request | None:
        held = request.meta.get(LEASE_KEY)
        if not isinstance(held, HeldLease) or self.book is None:
            return None
        if not self.policy.exception_is_ban(request, exception):
            self.book.finished(held)
            return None  # RetryMiddleware decides: the proxy is not to blame
        self._inc("proxy_operator/unreachable")
        await self.book.unreachable(held)
        return self._retry(request, "unreachable")

    # -- helpers -------------------------------------------------------------------------------

    def _retry(self, request: Request, why: str) -> Request:
        tries = int(request.meta.get(RETRIES_KEY, 0)) + 1
        if tries > self.retry_times:
            self._inc("proxy_operator/retries_exhausted")
            # A banned answer never reaches the spider's callback as a page.
            raise IgnoreRequest(f"{request.url}: {why} through {tries - 1} proxies")
        retry = request.replace(dont_filter=True)
        retry.meta[RETRIES_KEY] = tries
        retry.meta.pop("proxy", None)
        retry.meta.pop("download_slot", None)
        retry.meta.pop(LEASE_KEY, None)
        self._inc(f"proxy_operator/retry/{why}")
        return retry

    def _slot(self, request: Request) -> Any:
        engine = self.crawler.engine
        key = request.meta.get("download_slot")
        if engine is None or key is None:
            return None, None
        return key, engine.downloader.slots.get(key)

    def _rest(self, request: Request, seconds: float, pace: float) -> None:
        """The proxy's slot waits ``seconds`` before its next request (the requests already
        queued on it included), then keeps the pace."""
        key, slot = self._slot(request)
        if slot is None:
            return
        base = self._base_delays.setdefault(key, slot.delay)
        slot.delay = rest_delay(seconds, slot.jitter)
        slot.lastseen = time.monotonic()
        self._resting.add(key)

        def after_rest() -> None:
            self._resting.discard(key)
            slot.delay = max(base, pace)

        asyncio.get_running_loop().call_later(seconds, after_rest)

    def _set_pace(self, request: Request, pace: float) -> None:
        key, slot = self._slot(request)
        if slot is not None and key not in self._resting:
            slot.delay = max(self._base_delays.setdefault(key, slot.delay), pace)

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)
