"""Where a request the send-time check stopped (``LeaseEnded``, send_check.py) is sent again.

The check fails the request inside the download handler, so Scrapy passes ``LeaseEnded`` up
the downloader middlewares' ``process_exception`` chain, highest order first. Caught at 610 (the
add-on's own middleware) it has already passed DownloaderStats (850), which counts it under
``downloader/exception_count`` and ``downloader/exception_type_count/…``: a user reading the
stats sees errors where no request failed. So ``RerouteMiddleware`` sits above every built-in
(ORDER) and turns it into the request again first; re-routes are counted under the add-on's
own keys (``proxy_operator/rerouted``, ``proxy_operator/reroute/max_reached``).

A request is re-routed at most ``PROXY_OPERATOR_MAX_REROUTES`` times (each time its lease ended
before it could be sent); then it fails with ``ReroutesExhausted``, never sent without a proxy."""

from __future__ import annotations

from typing import Any, Literal, Protocol
from weakref import WeakKeyDictionary

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.stats import DownloaderStats
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.misc import load_object

from .send_check import LeaseEnded
from .settings import SettingError

#: Above DownloaderStats (850) and HttpCacheMiddleware (900): its process_exception runs first.
ORDER = 990
REROUTE_PATH = "proxy_operator.scrapy.RerouteMiddleware"


class ReroutesExhausted(IgnoreRequest):
    """Every lease the request was given ended before it could be sent, PROXY_OPERATOR_MAX_REROUTES
    times: it fails (it was never sent, and never goes without a proxy)."""


def reroute_verdict(done: int, cap: int) -> Literal["again", "give_up"]:
    """A request stopped at send time after ``done`` re-routes: sent again, or failed. Pure."""
    return "again" if done < cap else "give_up"


class Rerouter(Protocol):
    def reroute(self, request: Request) -> Request: ...


#: Crawler -> its ProxyOperatorMiddleware (which holds the book the request's lease is in).
_rerouters: WeakKeyDictionary[Crawler, Rerouter] = WeakKeyDictionary()


def register(crawler: Crawler, rerouter: Rerouter) -> None:
    _rerouters[crawler] = rerouter


class RerouteMiddleware:
    """``DOWNLOADER_MIDDLEWARES = {"proxy_operator.scrapy.RerouteMiddleware": 990}`` (the add-on
    sets it): sends again a request the check stopped, before any middleware counts an error."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RerouteMiddleware:
        return cls(crawler)

    async def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if not isinstance(exception, LeaseEnded):
            return None
        rerouter = _rerouters.get(self.crawler)
        # Without the add-on's middleware the exception goes on down (its own branch re-routes).
        return rerouter.reroute(request) if rerouter is not None else None


def check_reroute_middleware(settings: Any) -> None:
    """The middleware needs the re-route above DownloaderStats, or the start-up stops naming
    DOWNLOADER_MIDDLEWARES (ADDONS sets it; a project without ADDONS sets it by hand)."""
    orders: dict[Any, Any] = settings.get_component_priority_dict_with_base("DOWNLOADER_MIDDLEWARES")
    ours: int | None = None
    stats: int | None = None
    for component, order in orders.items():
        loaded = _load(component)
        if loaded is RerouteMiddleware and order is not None:
            ours = int(order)
        elif isinstance(loaded, type) and issubclass(loaded, DownloaderStats) and order is not None:
            stats = int(order)
    if ours is not None and (stats is None or ours > stats):
        return
    got = "it is not enabled" if ours is None else f"it is at {ours}, DownloaderStats at {stats}"
    raise SettingError(
        "DOWNLOADER_MIDDLEWARES",
        f'must enable "{REROUTE_PATH}" above DownloaderStats (e.g. at {ORDER}; ADDONS = '
        '{"proxy_operator.scrapy.Addon": 0} sets it): it sends again a request whose lease ended before it '
        f"was sent, which DownloaderStats would otherwise count as a download error; {got}",
    )


def _load(component: Any) -> Any:
    if not isinstance(component, str):
        return component
    try:
        return load_object(component)
    except (ImportError, NameError, ValueError, AttributeError):
        return None
