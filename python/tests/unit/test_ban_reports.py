"""A ban or a dead proxy takes the proxy out of use at once; the report goes to the discovery
API in the background, sent again when it fails, so a slow or failing API never holds a
response (before, the ban report was awaited in process_response: a 3 s API held every banned
response 3 s). Until the server has the report, the site's asks exclude the proxy; the close
waits for unanswered reports a bounded time."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from twisted.internet.error import ConnectionRefusedError

from addon_fixtures import FakeApi, middleware_with
from proxy_operator import DiscoveryApiError
from proxy_operator.scrapy import api_calls
from proxy_operator.scrapy.leases import BookOptions, LeaseBook

REPORT_SECONDS = 3.0


class SlowReports(FakeApi):
    """Answers a report only after REPORT_SECONDS, or fails the first ``failures`` with a 503;
    ``heard``: each report the API took, with when."""

    failures = 0
    report_seconds = REPORT_SECONDS

    def __init__(self, url: str = "", token: str | None = None) -> None:
        super().__init__(url, token)
        self.heard: list[tuple[str, str, float]] = []
        self.attempts = 0

    async def report(self, lease_id: str, result: str, **kw: Any) -> dict[str, object]:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise DiscoveryApiError(503, "store_unavailable", "redis")
        await asyncio.sleep(self.report_seconds)
        self.heard.append((lease_id, result, time.monotonic()))
        return {}


@pytest.mark.parametrize("outcome", ["banned", "unreachable"])
def test_a_proxy_reported_out_is_out_at_once_and_the_response_not_held_by_the_api(outcome: str) -> None:
    middleware = middleware_with(SlowReports)

    async def run() -> tuple[float, str, str, list[str], float]:
        await middleware.spider_opened()
        first = Request("http://shop.example/a")
        await middleware.process_request(first)
        started = time.monotonic()
        if outcome == "banned":
            retry = await middleware.process_response(first, HtmlResponse(first.url, status=403, request=first))
        else:
            retry = await middleware.process_exception(first, ConnectionRefusedError())
        held_for = time.monotonic() - started
        assert isinstance(retry, Request)
        await middleware.process_request(retry)  # while the report is still on its way
        client = middleware.client
        excluded = client.excluded[-1]
        closing = time.monotonic()
        await middleware.spider_closed()  # waits for the report
        assert [r[1] for r in client.heard] == [outcome]
        return held_for, first.meta["proxy"], retry.meta["proxy"], excluded, time.monotonic() - closing

    held_for, before, after, excluded, close_seconds = asyncio.run(run())
    assert held_for < 0.5  # was REPORT_SECONDS: the report awaited in the response path
    assert after != before  # the retry goes through another proxy
    assert "demo/p0" in excluded  # the ask made before the server had the report excluded it
    assert close_seconds < REPORT_SECONDS + 1.0


class Failing503(SlowReports):
    failures = 2
    report_seconds = 0.0


def test_a_report_the_api_fails_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_calls, "MAX_REPORT_BACKOFF", 0.05)
    client = Failing503()
    book = LeaseBook(client, BookOptions(), time.monotonic)  # type: ignore[arg-type]

    async def run() -> None:
        held = await book.acquire("shop.example")
        book.banned(held)
        await book.close()

    asyncio.run(run())
    assert (client.attempts, [r[1] for r in client.heard]) == (3, ["banned"])
    assert book.banned_since[("shop.example", "demo/p0")] < float("inf")  # heard


class Unanswered(SlowReports):
    report_seconds = 30.0


def test_the_close_waits_for_an_unanswered_report_a_bounded_time() -> None:
    book = LeaseBook(Unanswered(), BookOptions(close_wait_seconds=0.5), time.monotonic)  # type: ignore[arg-type]

    async def run() -> float:
        held = await book.acquire("shop.example")
        book.banned(held)
        started = time.monotonic()
        await book.close()
        return time.monotonic() - started

    assert asyncio.run(run()) < 1.5
    # Never heard: the proxy stays out of this crawl's asks for the host.
    assert book.banned_since[("shop.example", "demo/p0")] == float("inf")


class TimingOut(FakeApi):
    """Every report times out as httpx says it: an exception with no message."""

    async def report(self, lease_id: str, result: str, **kw: Any) -> dict[str, object]:
        raise httpx.ReadTimeout("")


@pytest.mark.parametrize(
    ("api", "out", "log"),
    [
        # Given up at close: before, only "1 calls ... still unanswered", naming neither.
        (Unanswered, "banned", "never took 1 report(s) that took a proxy out: banned demo/p0 for shop.example"),
        (Unanswered, "unreachable", "never took 1 report(s) that took a proxy out: unreachable demo/p0"),
        # Failed every try: before, "reporting banned failed (sent again): " with nothing after it.
        (TimingOut, "banned", "reporting banned failed (sent again): ReadTimeout"),
    ],
)
def test_a_report_the_api_never_took_is_named_and_counted_at_close(
    api: type, out: str, log: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_calls, "MAX_REPORT_BACKOFF", 0.01)
    book = LeaseBook(api(), BookOptions(close_wait_seconds=0.3), time.monotonic)  # type: ignore[arg-type]

    async def run() -> None:
        held = await book.acquire("shop.example")
        book.banned(held) if out == "banned" else book.unreachable(held)
        await book.close()

    with caplog.at_level(logging.WARNING, logger="proxy_operator"):
        asyncio.run(run())
    assert log in caplog.text
    assert (book.stats.unheard_banned, book.stats.unheard_unreachable) == ((1, 0) if out == "banned" else (0, 1))
