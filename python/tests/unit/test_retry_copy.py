"""A request RetryMiddleware copied keeps the old lease in its meta; its outcome was counted
when its answer came, so the copy's own failure must not count that lease down again."""

from __future__ import annotations

import asyncio

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from addon_fixtures import PLAIN
from proxy_operator import Lease, NoLease
from proxy_operator.scrapy import ProxyOperatorMiddleware
from proxy_operator.scrapy.middleware import LEASE_KEY



class OneLease:
    def __init__(self, url: str, token: str | None = None) -> None:
        self.asks = 0

    async def lease(self, **kw: object) -> Lease:
        self.asks += 1
        if self.asks > 1:
            raise NoLease(409, "no_match", "nothing")
        return Lease("l1", "demo/p0", "http://127.0.0.1:1", "2099-01-01T00:00:00Z", str(kw.get("target")))

    async def release(self, lease_id: str) -> None:
        pass

    async def report_many(self, reports: object) -> list[object]:
        return []

    async def aclose(self) -> None:
        pass


def test_a_retry_copy_whose_lease_ask_fails_does_not_count_the_old_lease_down_again() -> None:
    crawler = get_crawler(
        Spider, {**PLAIN, "PROXY_OPERATOR_URL": "http://127.0.0.1:9", "PROXY_OPERATOR_CLIENT": OneLease, "PROXY_OPERATOR_MAX_WAIT": 0.3}
    )
    crawler.spider = Spider("s")
    middleware = ProxyOperatorMiddleware.from_crawler(crawler)

    async def run() -> list[int]:
        await middleware.spider_opened()
        a, b = Request("http://shop.example/a"), Request("http://shop.example/b")
        await middleware.process_request(a)
        held = a.meta[LEASE_KEY]
        held.proven = True
        await middleware.process_request(b)
        counts = [held.in_flight]
        # a's answer: a 503 (nothing to report); RetryMiddleware's copy keeps a's meta.
        await middleware.process_response(a, HtmlResponse(a.url, status=503, request=a))
        counts.append(held.in_flight)
        retry = a.replace(dont_filter=True)
        assert middleware.book is not None
        held.rest_until = middleware.book.clock() + 10  # the retry cannot take it; the ask is refused
        try:
            await middleware.process_request(retry)
        except IgnoreRequest as err:
            await middleware.process_exception(retry, err)  # as Scrapy's middleware manager does
        counts.append(held.in_flight)
        await middleware.spider_closed()
        return counts

    # b is still in flight on the lease after a's retry failed.
    assert asyncio.run(run()) == [2, 1, 1]
