"""A request whose lease ended while it waited in its download slot is stopped at send time
(send_check.py) and sent again with a fresh lease (reroute.py). Through Scrapy's own downloader
middleware chain, as the add-on sets it up: the re-route is counted under the add-on's keys,
never as a download error in Scrapy's ``downloader/exception_*`` stats (before: one
``downloader/exception_type_count/proxy_operator.scrapy.send_check.LeaseEnded`` per re-route);
and a request whose every lease ends before it is sent fails after PROXY_OPERATOR_MAX_REROUTES
re-routes in a row, never sent (before: re-routed for ever)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from addon_fixtures import NOWHERE, FakeApi, Inner
from proxy_operator.scrapy import Addon, DownloadHandler, ProxyOperatorMiddleware, ReroutesExhausted
from proxy_operator.scrapy.meta_keys import LEASE_KEY, REROUTES_KEY
from proxy_operator.scrapy.reroute import reroute_verdict
from proxy_operator.scrapy.send_check import INNER_SETTING

Send = Callable[[Request], Coroutine[Any, Any, Response]]


@pytest.mark.parametrize(
    ("done", "cap", "verdict"),
    [(0, 10, "again"), (9, 10, "again"), (10, 10, "give_up"), (0, 0, "give_up"), (11, 10, "give_up")],
)
def test_a_request_is_rerouted_at_most_the_cap(done: int, cap: int, verdict: str) -> None:
    assert reroute_verdict(done, cap) == verdict


class Chain:
    """Scrapy's downloader middleware chain of a crawler with the add-on (ADDONS), its http
    sent by Inner after the add-on's check."""

    def __init__(self, **settings: Any) -> None:
        crawler = get_crawler(
            Spider,
            {
                "ADDONS": {Addon: 0},
                INNER_SETTING: {"http": Inner, "https": Inner},
                "PROXY_OPERATOR_URL": NOWHERE,
                "PROXY_OPERATOR_CLIENT": FakeApi,
                **settings,
            },
        )
        crawler._apply_settings()
        crawler.spider = Spider("s")
        self.crawler = crawler
        self.manager = DownloaderMiddlewareManager.from_crawler(crawler)
        self.ours = next(m for m in self.manager.middlewares if isinstance(m, ProxyOperatorMiddleware))
        self.handler = DownloadHandler.from_crawler(crawler)

    def ending_first(self, ends: int) -> Send:
        """Sends a request as Scrapy's downloader would, after its wait in the slot; during the
        wait of each of the first ``ends`` requests its lease ends (another request's 403)."""
        left = [ends]

        async def send(request: Request) -> Response:
            if left[0] > 0:
                left[0] -= 1
                assert self.ours.book is not None
                self.ours.book.banned(request.meta[LEASE_KEY])
            return await self.handler.download_request(request)

        return send

    def stats(self) -> dict[str, Any]:
        assert self.crawler.stats is not None
        return dict(self.crawler.stats.get_stats())


def test_a_reroute_is_counted_as_the_addons_not_as_a_download_error() -> None:
    Inner.sent = []
    chain = Chain()

    async def run() -> list[str]:
        await chain.ours.spider_opened()
        send = chain.ending_first(1)
        outcomes = []
        result: Request | Response = Request("http://shop.example/a")
        while isinstance(result, Request):
            request = result
            result = await chain.manager.download_async(send, request)
            outcomes.append(type(result).__name__)
        await chain.ours.spider_closed()
        return outcomes

    assert asyncio.run(run()) == ["Request", "HtmlResponse"]
    stats = chain.stats()
    assert {k: v for k, v in stats.items() if k.startswith("downloader/exception")} == {}
    assert stats["proxy_operator/rerouted"] == 1
    assert stats["downloader/response_status_count/200"] == 1
    assert Inner.sent == ["http://shop.example/a"]


@pytest.mark.parametrize("cap", [0, 1, 3])
def test_a_request_whose_every_lease_ends_before_it_is_sent_fails_after_the_cap(
    cap: int, caplog: pytest.LogCaptureFixture
) -> None:
    Inner.sent = []
    chain = Chain(PROXY_OPERATOR_MAX_REROUTES=cap)

    async def run() -> tuple[int, str]:
        await chain.ours.spider_opened()
        send = chain.ending_first(1000)  # every lease ends while its request waits
        request = Request("http://shop.example/a")
        rerouted = 0
        try:
            while True:
                result = await chain.manager.download_async(send, request)
                assert isinstance(result, Request), "a request whose every lease ended was sent"
                request, rerouted = result, rerouted + 1
                if rerouted > cap + 5:
                    return rerouted, "re-routed with no end"
        except ReroutesExhausted as err:
            return rerouted, str(err)
        finally:
            assert chain.ours.book is not None
            leases = [h for site in chain.ours.book.sites.values() for h in site.leases]
            assert all(h.in_flight == 0 for h in leases)
            await chain.ours.spider_closed()

    with caplog.at_level(logging.WARNING, logger="proxy_operator"):
        rerouted, error = asyncio.run(run())
    assert rerouted == cap
    assert error == (
        f"proxy-operator: http://shop.example/a: not sent: its lease ended before it could be sent {cap + 1} "
        f"times (PROXY_OPERATOR_MAX_REROUTES = {cap}); it never went without a proxy"
    )
    assert error in caplog.text  # Scrapy does not log an IgnoreRequest: the add-on does
    assert Inner.sent == []  # never sent, and never without a proxy
    stats = chain.stats()
    assert stats.get("proxy_operator/rerouted", 0) == cap
    assert stats["proxy_operator/reroute/max_reached"] == 1
    assert {k: v for k, v in stats.items() if k.startswith("downloader/exception")} == {}


@pytest.mark.parametrize(
    "sent_then",
    [
        "banned",  # sent, banned, retried through another lease by the add-on
        "copied",  # sent, then a redirect or RetryMiddleware's copy (meta copied, the old lease in it)
    ],
)
def test_the_cap_counts_reroutes_in_a_row_a_request_that_was_sent_starts_again(sent_then: str) -> None:
    chain = Chain(PROXY_OPERATOR_MAX_REROUTES=2)

    async def run() -> dict[str, Any]:
        await chain.ours.spider_opened()
        request = Request("http://shop.example/a", meta={REROUTES_KEY: 2})  # at the cap
        await chain.ours.process_request(request)
        if sent_then == "banned":
            again = await chain.ours.process_response(request, HtmlResponse(request.url, status=403, request=request))
            assert isinstance(again, Request)
        else:
            again = request.replace(url="http://shop.example/b")
            await chain.ours.process_request(again)
        await chain.ours.spider_closed()
        return again.meta

    assert REROUTES_KEY not in asyncio.run(run())
