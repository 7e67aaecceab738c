"""What the add-on's unit tests share: the settings of a project without ADDONS, a fake
discovery API that grants its four proxies (honouring ``exclude``) and notes the reports, and a
crawler (or middleware) built with a client class."""

from __future__ import annotations

from typing import Any

from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from proxy_operator import Lease, NoLease
from proxy_operator.scrapy import ProxyOperatorMiddleware
from proxy_operator.scrapy.reroute import ORDER as REROUTE_ORDER
from proxy_operator.scrapy.reroute import REROUTE_PATH
from proxy_operator.scrapy.send_check import INNER_SETTING, SEND_CHECK_HANDLERS

MIDDLEWARE = "proxy_operator.scrapy.ProxyOperatorMiddleware"
#: A project without ADDONS: the middleware, the send-time check (send_check.py) and the
#: re-route of what it stops (reroute.py).
PLAIN: dict[str, Any] = {
    "DOWNLOADER_MIDDLEWARES": {MIDDLEWARE: 610, REROUTE_PATH: REROUTE_ORDER},
    "DOWNLOAD_HANDLERS": SEND_CHECK_HANDLERS,
}
#: A discovery API at a port nothing listens on (the tests' clients never call it).
NOWHERE = "http://127.0.0.1:9"
PROXIES = 4


class FakeApi:
    """Grants its PROXIES proxies in turn, skipping the excluded ones (all_busy when none is
    left); every report is noted (``reports``: the results) and answered; nothing else says
    anything. Subclasses change one call."""

    def __init__(self, url: str = "", token: str | None = None) -> None:
        self.granted = 0
        self.excluded: list[list[str]] = []
        self.reports: list[str] = []

    async def lease(self, *, exclude: list[str] | None = None, target: str | None = None, **kw: Any) -> Lease:
        self.excluded.append(list(exclude or []))
        free = [f"demo/p{i}" for i in range(PROXIES) if f"demo/p{i}" not in (exclude or [])]
        if not free:
            raise NoLease(409, "all_busy", "every proxy excluded")
        proxy = free[self.granted % len(free)]
        self.granted += 1
        return Lease(f"l{self.granted}", proxy, f"http://{proxy[-2:]}.invalid:3128", "2099-01-01T00:00:00Z", str(target))

    async def report(self, lease_id: str, result: str, **kw: Any) -> dict[str, object]:
        self.reports.append(result)
        return {}

    async def release(self, lease_id: str) -> None:
        pass

    async def report_many(self, reports: object) -> list[object]:
        return []

    async def end_session(self, key: str) -> None:
        pass

    async def aclose(self) -> None:
        pass


class Inner:
    """A wrapped download handler that notes what it was given to send, and answers 200."""

    sent: list[str] = []
    lazy = False

    def __init__(self, crawler: object) -> None:
        pass

    @classmethod
    def from_crawler(cls, crawler: object) -> Inner:
        return cls(crawler)

    async def download_request(self, request: Request) -> HtmlResponse:
        Inner.sent.append(request.url)
        return HtmlResponse(request.url, status=200, body=b"ok", request=request)

    async def close(self) -> None:
        pass


def crawler_with(client: type, **settings: Any) -> Any:
    """A crawler of a project without ADDONS, its API the given client class, its http and https
    sent by Inner after the check."""
    crawler = get_crawler(
        Spider,
        {
            **PLAIN,
            INNER_SETTING: {"http": Inner, "https": Inner},
            "PROXY_OPERATOR_URL": NOWHERE,
            "PROXY_OPERATOR_CLIENT": client,
            **settings,
        },
    )
    crawler.spider = Spider("s")
    return crawler


def middleware_with(client: type, **settings: Any) -> ProxyOperatorMiddleware:
    return ProxyOperatorMiddleware.from_crawler(crawler_with(client, **settings))
