"""The check at send time (send_check.py): the add-on puts it in front of the project's http
and https download handlers; it fails a request whose lease ended while it waited in its slot
(LeaseEnded), before the wrapped handler sees it; the middleware sends that request again with a
fresh lease, as one that never left (no report, not a retry). A project with the middleware
but without the check does not start (DOWNLOAD_HANDLERS named). The real crawls are in
test/python/scrapy-queued.unit.test.ts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from scrapy import Request
from scrapy.settings import Settings

from addon_fixtures import FakeApi, Inner, crawler_with
from proxy_operator import Lease, NoLease
from proxy_operator.scrapy import Addon, DownloadHandler, LeaseEnded, ProxyOperatorMiddleware
from proxy_operator.scrapy.leases import BookOptions, LeaseBook
from proxy_operator.scrapy.middleware import LEASE_KEY, RETRIES_KEY
from proxy_operator.scrapy.send_check import HANDLER_PATH, INNER_SETTING, SEND_CHECK_HANDLERS, check_send_handlers
from proxy_operator.scrapy.settings import SettingError

HTTP11 = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
MINE = "my_project.handlers.ImpersonatingHandler"


@pytest.mark.parametrize(
    ("project", "handlers", "inner"),
    [
        # Scrapy's own handler, wrapped.
        ({}, {"http": HANDLER_PATH, "https": HANDLER_PATH}, {"http": HTTP11, "https": HTTP11}),
        # The project's own (an impersonating one, say) still sends, after the check.
        ({"https": MINE}, {"http": HANDLER_PATH, "https": HANDLER_PATH}, {"http": HTTP11, "https": MINE}),
        # http disabled by the project: it stays disabled (nothing is sent).
        ({"http": None}, {"http": None, "https": HANDLER_PATH}, {"https": HTTP11}),
        # Other schemes are not the add-on's (routes.py refuses them before a lease).
        ({"ftp": None}, {"ftp": None, "http": HANDLER_PATH, "https": HANDLER_PATH}, {"http": HTTP11, "https": HTTP11}),
        # Already the check (set by hand as for a project without ADDONS): left as it is.
        (SEND_CHECK_HANDLERS, {"http": HANDLER_PATH, "https": HANDLER_PATH}, {}),
    ],
)
def test_the_addon_puts_the_check_in_front_of_the_http_handlers(
    project: dict[str, Any], handlers: dict[str, Any], inner: dict[str, Any]
) -> None:
    settings = Settings({"DOWNLOAD_HANDLERS": project})
    Addon().update_settings(settings)
    got = settings.getdict("DOWNLOAD_HANDLERS")
    assert {k: got[k] for k in handlers} == handlers
    assert settings.getdict(INNER_SETTING) == inner


@pytest.mark.parametrize(
    ("handlers", "error"),
    [
        (SEND_CHECK_HANDLERS, None),
        ({"http": HANDLER_PATH, "https": None}, None),  # https disabled: nothing to check
        ({}, f"DOWNLOAD_HANDLERS must send http: requests with \"{HANDLER_PATH}\""),
        ({"http": HANDLER_PATH}, f"DOWNLOAD_HANDLERS must send https: requests with \"{HANDLER_PATH}\""),
        ({"http": MINE, "https": HANDLER_PATH}, "got 'my_project.handlers.ImpersonatingHandler'"),
    ],
)
def test_the_middleware_needs_the_check(handlers: dict[str, Any], error: str | None) -> None:
    settings = Settings({"DOWNLOAD_HANDLERS": handlers})
    if error is None:
        check_send_handlers(settings)
        return
    with pytest.raises(SettingError, match=error.replace("(", r"\(").replace(".", r"\.")):
        check_send_handlers(settings)


@pytest.mark.parametrize(("ended", "outcome"), [(False, "sent"), (True, "LeaseEnded")])
def test_a_request_whose_lease_ended_while_it_waited_is_not_sent(ended: bool, outcome: str) -> None:
    Inner.sent = []
    crawler = crawler_with(FakeApi)
    middleware = ProxyOperatorMiddleware.from_crawler(crawler)
    handler = DownloadHandler.from_crawler(crawler)

    async def run() -> str:
        await middleware.spider_opened()
        request = Request("http://shop.example/a")
        await middleware.process_request(request)  # given its lease, then it waits in its slot
        if ended:
            assert middleware.book is not None
            middleware.book.banned(request.meta[LEASE_KEY])  # another request's 403 meanwhile
        try:
            await handler.download_request(request)
            return "sent"
        except LeaseEnded:
            return "LeaseEnded"
        finally:
            await handler.close()
            await middleware.spider_closed()

    assert asyncio.run(run()) == outcome
    assert Inner.sent == ([] if ended else ["http://shop.example/a"])


def test_a_request_not_sent_is_sent_again_with_a_fresh_lease_not_counted_as_a_retry() -> None:
    crawler = crawler_with(FakeApi)
    middleware = ProxyOperatorMiddleware.from_crawler(crawler)

    async def run() -> None:
        await middleware.spider_opened()
        assert middleware.book is not None
        request = Request("http://shop.example/a", meta={RETRIES_KEY: 2})
        await middleware.process_request(request)
        held = request.meta[LEASE_KEY]
        middleware.book.banned(held)
        again = await middleware.process_exception(request, LeaseEnded("ended"))
        assert isinstance(again, Request)
        assert (again.dont_filter, again.meta.get(RETRIES_KEY)) == (True, 2)  # not a retry
        assert {"proxy", "download_slot", LEASE_KEY} & set(again.meta) == set()
        assert held.in_flight == 0
        await middleware.process_request(again)
        assert again.meta[LEASE_KEY] is not held and again.meta[LEASE_KEY].proxy_id != held.proxy_id
        await middleware.spider_closed()
        # Only the ban was reported: the request re-routed was no failure of any proxy.
        assert middleware.client.reports == ["banned"]

    asyncio.run(run())
    assert crawler.stats.get_value("proxy_operator/rerouted") == 1


class Covered(FakeApi):
    """Refuses the first ask that excludes two proxies (all_busy: the site's leases cover what
    is free); grants the next proxy otherwise."""

    refused = False

    async def lease(self, *, exclude: list[str] | None = None, **kw: Any) -> Lease:
        if len(exclude or []) >= 2 and not self.refused:
            self.refused = True
            raise NoLease(409, "all_busy", "every other proxy is busy")
        return await super().lease(**kw)


def test_a_site_that_loses_a_lease_asks_again_at_once() -> None:
    """Before, a site whose ask was refused ("covered") asked nothing for 30 s even after one of
    its leases ended: re-routed requests piled onto the leases left (a crawl took 39 s, not 19)."""
    api = Covered()
    book = LeaseBook(api, BookOptions(requests_per_lease=1), time.monotonic)  # type: ignore[arg-type]

    async def settle() -> None:
        for _ in range(5):
            await asyncio.sleep(0.01)

    async def run() -> list[str]:
        site = ("shop.example", None)
        first = await book.acquire("shop.example")  # p0
        first.proven = True
        await book.acquire("shop.example")  # through p0; asks for p1
        await settle()
        for held in book.sites[site].leases:
            held.proven = True
        await book.acquire("shop.example")
        await book.acquire("shop.example")  # both busy: asks excluding p0, p1: refused, covered
        await settle()
        assert api.refused
        book.banned(first)  # p0 out: the site no longer covers the fleet
        await book.acquire("shop.example")
        await settle()
        held = [h.proxy_id for h in book.sites[site].leases]
        await book.close()
        return held

    assert asyncio.run(run()) == ["demo/p1", "demo/p2"]
