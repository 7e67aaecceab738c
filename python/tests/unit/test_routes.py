"""Only http(s) requests go through a proxy: Scrapy's other handlers ignore meta['proxy']."""

from __future__ import annotations

import asyncio

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler

from addon_fixtures import PLAIN
from proxy_operator.scrapy import ProxyOperatorMiddleware
from proxy_operator.scrapy.routes import Route, route_of



@pytest.mark.parametrize(
    ("url", "route"),
    [
        ("http://shop.example/a", "proxy"),
        ("HTTPS://shop.example/a", "proxy"),
        ("ftp://files.example/a.txt", "refuse"),
        ("s3://bucket/key", "refuse"),
        ("gs://bucket/key", "refuse"),
        ("ws://shop.example/feed", "refuse"),
        ("data:,hello", "local"),
        ("file:///etc/hosts", "local"),
        ("file://localhost/etc/hosts", "local"),
    ],
)
def test_a_request_goes(url: str, route: Route) -> None:
    assert route_of(url) == route


class NoCalls:
    """A client that fails the test if the middleware asks it for anything."""

    def __init__(self, url: str, token: str | None = None) -> None:
        pass

    async def lease(self, **kw: object) -> None:
        raise AssertionError("a lease was asked for")

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(
    ("url", "meta", "outcome"),
    [
        ("ftp://files.example/a.txt", {}, "proxy-operator: ftp://files.example/a.txt: a proxy cannot carry ftp: requests"),
        ("s3://bucket/key", {}, "proxy-operator: s3://bucket/key: a proxy cannot carry s3: requests"),
        ("data:,hello", {}, "sent"),
        ("file://localhost/etc/hosts", {}, "sent"),
        ("ftp://files.example/a.txt", {"dont_proxy": True}, "sent"),
    ],
)
def test_a_request_a_proxy_cannot_carry_takes_no_lease(url: str, meta: dict[str, object], outcome: str) -> None:
    crawler = get_crawler(
        Spider, {**PLAIN, "PROXY_OPERATOR_URL": "http://127.0.0.1:9", "PROXY_OPERATOR_CLIENT": NoCalls, "PROXY_OPERATOR_MAX_WAIT": 0.5}
    )
    crawler.spider = Spider("s")
    middleware = ProxyOperatorMiddleware.from_crawler(crawler)

    async def send() -> str:
        await middleware.spider_opened()
        request = Request(url, meta=meta)
        try:
            await middleware.process_request(request)
        except IgnoreRequest as err:
            return str(err)
        finally:
            await middleware.spider_closed()
        assert "proxy" not in request.meta
        return "sent"

    assert asyncio.run(send()).startswith(outcome)
