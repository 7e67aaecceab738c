"""A lease ask that fails (anything but a 409 refusal) is sorted: the token or a setting refused
stops the crawl naming the setting; a request's own session or host refused drops its requests
at once with the server's answer; the API down or failing is asked again, and a request that
gets no lease meanwhile is dropped with that cause: never a made-up all_busy after the full wait."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
import pytest

from addon_fixtures import PLAIN, FakeApi
from proxy_operator import DiscoveryApiError, Lease
from proxy_operator.scrapy.asking import AskFailure, after_failure
from proxy_operator.scrapy.leases import BookOptions, LeaseBook, LeaseFailed


def api_error(status: int, code: str, message: str) -> DiscoveryApiError:
    return DiscoveryApiError(status, code, message)


@pytest.mark.parametrize(
    ("err", "failure"),
    [
        (
            api_error(401, "unauthorized", "missing or wrong bearer token"),
            AskFailure("stop", "the discovery API refused PROXY_OPERATOR_TOKEN (401 unauthorized: missing or wrong bearer token)"),
        ),
        (
            api_error(403, "forbidden", "token out of scope"),
            AskFailure("stop", "PROXY_OPERATOR_TOKEN may not lease these proxies (403 forbidden: token out of scope)"),
        ),
        (
            api_error(400, "invalid_request", "ttlSeconds must be an integer from 1 to 600, got 900"),
            AskFailure("stop", "the discovery API refused PROXY_OPERATOR_TTL (400 invalid_request: ttlSeconds must be an integer from 1 to 600, got 900)"),
        ),
        (
            api_error(400, "invalid_request", "selector.geo must be a string, got 1"),
            AskFailure("stop", "the discovery API refused PROXY_OPERATOR_SELECTOR (400 invalid_request: selector.geo must be a string, got 1)"),
        ),
        (
            api_error(400, "invalid_request", "session must be 1 to 128 characters of letters, digits and . _ : @ -, got 'user 42'"),
            AskFailure("drop", "the discovery API refused its meta['proxy_operator_session'] (400 invalid_request: session must be 1 to 128 characters of letters, digits and . _ : @ -, got 'user 42')"),
        ),
        (
            api_error(400, "invalid_request", "target must be a host name, without a port: send 'a.example'"),
            AskFailure("drop", "the discovery API refused its host (400 invalid_request: target must be a host name, without a port: send 'a.example')"),
        ),
        (
            api_error(400, "invalid_request", "something new"),
            AskFailure("drop", "the discovery API refused the lease ask (400 invalid_request: something new)"),
        ),
        (
            api_error(404, "http_404", "Not Found"),
            AskFailure("stop", "PROXY_OPERATOR_URL does not look like the discovery API (404 http_404: Not Found)"),
        ),
        (api_error(500, "internal", "boom"), AskFailure("retry", "the discovery API failed (500 internal: boom)")),
        (
            api_error(503, "store_unavailable", "redis"),
            AskFailure("retry", "the discovery API failed (503 store_unavailable: redis)"),
        ),
        (
            api_error(429, "too_many_requests", "slow down"),
            AskFailure("retry", "the discovery API failed (429 too_many_requests: slow down)"),
        ),
        (
            httpx.ConnectError("All connection attempts failed"),
            AskFailure("retry", "the discovery API did not answer (ConnectError: All connection attempts failed)"),
        ),
    ],
)
def test_a_failed_ask_means(err: BaseException, failure: AskFailure) -> None:
    assert after_failure(err) == failure


class FailingApi:
    def __init__(self, err: BaseException) -> None:
        self.err, self.asks = err, 0

    async def lease(self, **kw: object) -> None:
        self.asks += 1
        raise self.err


@pytest.mark.parametrize(
    ("err", "verdict", "reason", "at_most_seconds"),
    [
        # Stopped or dropped at once: not after the wait (MAX_WAIT 2 s here).
        (api_error(401, "unauthorized", "wrong token"), "stop", "refused PROXY_OPERATOR_TOKEN (401", 1.0),
        (api_error(400, "invalid_request", "ttlSeconds must be an integer from 1 to 600, got 900"), "stop", "PROXY_OPERATOR_TTL", 1.0),
        (api_error(400, "invalid_request", "session must be 1 to 128 characters"), "drop", "meta['proxy_operator_session'] (400", 1.0),
        # Asked again until the wait ends, then dropped with the cause.
        (httpx.ConnectError("All connection attempts failed"), "retry", "within 2.0 s: the discovery API did not answer (ConnectError", 3.0),
        (api_error(503, "store_unavailable", "redis"), "retry", "within 2.0 s: the discovery API failed (503 store_unavailable: redis)", 3.0),
    ],
)
def test_a_request_whose_ask_fails_is_dropped_with_the_cause(
    err: BaseException, verdict: str, reason: str, at_most_seconds: float
) -> None:
    api = FailingApi(err)
    book = LeaseBook(api, BookOptions(max_wait_seconds=2.0), time.monotonic)  # type: ignore[arg-type]

    async def ask() -> LeaseFailed:
        try:
            await book.acquire("shop.example", "s1" if verdict == "drop" else None)
        except LeaseFailed as failed:
            return failed
        finally:
            await book.close()
        raise AssertionError("a lease came")

    started = time.monotonic()
    failed = asyncio.run(ask())
    assert (failed.verdict, time.monotonic() - started < at_most_seconds) == (verdict, True)
    assert reason in failed.reason
    if verdict == "retry":
        assert api.asks >= 2  # asked again a second later, as before


class Unauthorized:
    def __init__(self, url: str, token: str | None = None) -> None:
        pass

    async def lease(self, **kw: object) -> None:
        raise api_error(401, "unauthorized", "missing or wrong bearer token")

    async def aclose(self) -> None:
        pass


def test_a_refused_token_drops_the_request_at_once_and_stops_the_crawl() -> None:
    from scrapy import Request, Spider
    from scrapy.exceptions import IgnoreRequest
    from scrapy.utils.test import get_crawler

    from proxy_operator.scrapy import ProxyOperatorMiddleware

    crawler = get_crawler(Spider, {**PLAIN, "PROXY_OPERATOR_URL": "http://127.0.0.1:9", "PROXY_OPERATOR_CLIENT": Unauthorized})
    crawler.spider = Spider("s")
    middleware = ProxyOperatorMiddleware.from_crawler(crawler)

    async def send() -> str:
        await middleware.spider_opened()
        try:
            await middleware.process_request(Request("http://shop.example/a"))
        except IgnoreRequest as err:
            return str(err)
        finally:
            await middleware.spider_closed()
        raise AssertionError("sent")

    assert asyncio.run(send()) == (
        "proxy-operator: no proxy for http://shop.example/a: the discovery API refused PROXY_OPERATOR_TOKEN "
        "(401 unauthorized: missing or wrong bearer token)"
    )
    assert middleware.failure is not None and "PROXY_OPERATOR_TOKEN" in middleware.failure


class Slow:
    """An ask the client is still waiting out (503s with a long Retry-After)."""

    async def lease(self, **kw: object) -> None:
        await asyncio.sleep(30)


def test_a_request_whose_ask_has_not_been_answered_is_dropped_saying_so_not_all_busy() -> None:
    book = LeaseBook(Slow(), BookOptions(max_wait_seconds=0.5), time.monotonic)  # type: ignore[arg-type]

    async def ask() -> LeaseFailed:
        try:
            await book.acquire("shop.example")
        except LeaseFailed as failed:
            return failed
        finally:
            await book.close()
        raise AssertionError("a lease came")

    failed = asyncio.run(ask())
    assert (failed.verdict, failed.reason) == (
        "retry",
        "no lease for shop.example within 0.5 s: the discovery API has not answered the lease ask "
        "(the client may be waiting out its 503s or 429s)",
    )


class AtQuota(FakeApi):
    """Grants one lease; from then on the token is at its quota of live leases (429 lease_quota)."""

    async def lease(self, **kw: Any) -> Lease:
        if self.granted >= 1:
            self.excluded.append([])
            raise DiscoveryApiError(429, "lease_quota", "token 'crawler' holds 1 live leases (its quota)", 1.0)
        return await super().lease(**kw)


def test_a_site_at_the_tokens_quota_shares_its_leases_instead_of_asking_each_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = AtQuota()
    book = LeaseBook(api, BookOptions(requests_per_lease=1), time.monotonic)  # type: ignore[arg-type]

    async def run() -> tuple[int, int, int]:
        first = await book.acquire("shop.example")
        first.proven = True
        for _ in range(25):  # 2.5 s of requests, each wanting one more lease
            held = await book.acquire("shop.example")
            book.succeeded(held)
            await asyncio.sleep(0.1)
        asks_while_held, warned = len(api.excluded), caplog.text.count("lease_quota")
        book.banned(first)  # its lease ends: the site holds nothing, so the next request asks at once
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(book.acquire("shop.example"), 0.2)  # (and waits: the quota holds)
        asks_after = len(api.excluded)
        await book.close()
        return asks_while_held, warned, asks_after

    with caplog.at_level(logging.WARNING, logger="proxy_operator"):
        asks_while_held, warned, asks_after = asyncio.run(run())
    # The grant and one 429; before, an ask a second (3 more 429s here, 4 calls each through
    # the real client, and a warning each).
    assert (asks_while_held, warned) == (2, 1)
    assert asks_after == 3
