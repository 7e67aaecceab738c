"""The add-on and the middleware settings, on the current Scrapy, without a warning (pytest
makes every warning an error: see pyproject.toml)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import CloseSpider, IgnoreRequest, NotConfigured
from scrapy.utils.test import get_crawler

from addon_fixtures import MIDDLEWARE, PLAIN
from proxy_operator.scrapy import Addon, ProxyOperatorMiddleware
from proxy_operator.scrapy import middleware as middleware_module
from proxy_operator.scrapy.addon import ORDER
from proxy_operator.scrapy.send_check import SEND_CHECK_HANDLERS
from proxy_operator.scrapy.settings import SettingError


HERE = Path(__file__).parent


def middlewares(crawler) -> list[object]:  # type: ignore[no-untyped-def]
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager

    return list(DownloaderMiddlewareManager.from_crawler(crawler).middlewares)


def test_the_addon_inserts_the_middleware_between_retry_and_http_proxy() -> None:
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}, "PROXY_OPERATOR_URL": "http://127.0.0.1:8090"})
    crawler._apply_settings()
    assert crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")[ProxyOperatorMiddleware] == ORDER
    names = [type(m).__name__ for m in middlewares(crawler)]
    assert names.index("RetryMiddleware") < names.index("ProxyOperatorMiddleware") < names.index("HttpProxyMiddleware")
    # The re-route's process_exception runs before DownloaderStats' (the highest order first).
    assert names.index("DownloaderStats") < names.index("RerouteMiddleware") == len(names) - 1


def test_the_plain_middleware_setting_works_too() -> None:
    crawler = get_crawler(
        Spider,
        {**PLAIN, "PROXY_OPERATOR_URL": "http://127.0.0.1:8090"},
    )
    crawler._apply_settings()
    assert any(isinstance(m, ProxyOperatorMiddleware) for m in middlewares(crawler))


def test_without_the_api_url_the_start_up_fails_naming_the_setting() -> None:
    # Not NotConfigured: Scrapy reads that as "disable this component" and crawls without proxies.
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}})
    crawler._apply_settings()
    with pytest.raises(SettingError, match="PROXY_OPERATOR_URL is not set") as raised:
        middlewares(crawler)
    assert not isinstance(raised.value, NotConfigured)


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"PROXY_OPERATOR_URL": None}, "SettingError: PROXY_OPERATOR_URL is not set"),
        ({"PROXY_OPERATOR_URL": ""}, "SettingError: PROXY_OPERATOR_URL is not set"),
        ({"PROXY_OPERATOR_URL": 8090}, "SettingError: PROXY_OPERATOR_URL must be the discovery API's URL"),
        ({"PROXY_OPERATOR_URL": ["http://127.0.0.1:9"]}, "SettingError: PROXY_OPERATOR_URL must be"),
        ({"PROXY_OPERATOR_CLIENT": "startup_crawl.FailingClient"}, "SettingError: PROXY_OPERATOR_CLIENT FailingClient"),
        ({"PROXY_OPERATOR_CLIENT": "proxy_operator.DiscoveryClient"}, "SettingError: PROXY_OPERATOR_CLIENT must make an asyncio client"),
        ({"PROXY_OPERATOR_TTL": "abc"}, "SettingError: PROXY_OPERATOR_TTL must be an integer from 1 to 3600"),
        ({"PROXY_OPERATOR_MAX_WAIT": -1}, "SettingError: PROXY_OPERATOR_MAX_WAIT must be"),
        # The middleware without the send-time check (a project without ADDONS that set only
        # DOWNLOADER_MIDDLEWARES): a request queued on a banned proxy would still go through it.
        (
            {"ADDONS": None, "DOWNLOADER_MIDDLEWARES": {MIDDLEWARE: 610}},
            'SettingError: DOWNLOAD_HANDLERS must send http: requests with "proxy_operator.scrapy.DownloadHandler"',
        ),
        # Without the re-route above DownloaderStats (reroute.py), a request the check stopped
        # would be counted as a download error.
        (
            {"ADDONS": None, "DOWNLOADER_MIDDLEWARES": {MIDDLEWARE: 610}, "DOWNLOAD_HANDLERS": SEND_CHECK_HANDLERS},
            'SettingError: DOWNLOADER_MIDDLEWARES must enable "proxy_operator.scrapy.RerouteMiddleware" above '
            "DownloaderStats (e.g. at 990",
        ),
        (
            {
                "ADDONS": None,
                "DOWNLOADER_MIDDLEWARES": {MIDDLEWARE: 610, "proxy_operator.scrapy.RerouteMiddleware": 800},
                "DOWNLOAD_HANDLERS": SEND_CHECK_HANDLERS,
            },
            "it is at 800, DownloaderStats at 850",
        ),
        ({"PROXY_OPERATOR_MAX_REROUTES": -1}, "SettingError: PROXY_OPERATOR_MAX_REROUTES must be an integer, at least 0"),
        (
            {"TWISTED_REACTOR": "twisted.internet.epollreactor.EPollReactor"},
            "SettingError: TWISTED_REACTOR must be \"twisted.internet.asyncioreactor.AsyncioSelectorReactor\"",
        ),
    ],
)
def test_a_crawl_with_a_bad_setting_does_not_start(settings: dict[str, object], error: str) -> None:
    """A real crawl (CrawlerProcess) of a loopback site: it sends nothing (no proxy exists here,
    so any request reaching the site went without one) and its error names the setting."""
    done = subprocess.run(
        [sys.executable, str(HERE / "startup_crawl.py"), json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])},
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1])["site_hits"] == 0
    assert error in done.stderr


def test_a_request_the_addon_cannot_proxy_is_refused_not_sent_direct() -> None:
    """The book missing (spider_opened failed or never ran): every request the add-on would
    proxy is dropped; the documented opt-outs still go as the spider asked."""
    middleware = ProxyOperatorMiddleware.from_crawler(get_crawler(Spider, {**PLAIN, "PROXY_OPERATOR_URL": "http://127.0.0.1:9"}))
    middleware.failure = "the add-on did not start: RuntimeError: boom"

    def outcome(meta: dict[str, object]) -> str:
        try:
            asyncio.run(middleware.process_request(Request("http://shop.example/a", meta=meta)))
        except IgnoreRequest as err:
            return str(err)
        return "sent"

    assert outcome({}) == "proxy-operator: no proxy for http://shop.example/a: the add-on did not start: RuntimeError: boom"
    assert outcome({"proxy_operator_session": "s1"}).startswith("proxy-operator: no proxy for")
    assert outcome({"dont_proxy": True}) == "sent"
    assert outcome({"proxy": "http://my-own-proxy:3128"}) == "sent"
    # Scrapy's "no proxy from the environment" is no opt-out: before, these went direct.
    assert outcome({"proxy": None}).startswith("proxy-operator: no proxy for")
    assert outcome({"proxy": ""}).startswith("proxy-operator: no proxy for")


def test_a_failure_in_spider_opened_closes_the_spider(monkeypatch: pytest.MonkeyPatch) -> None:
    # Scrapy only logs a signal handler's exception; CloseSpider from spider_opened ends the crawl.
    middleware = ProxyOperatorMiddleware.from_crawler(get_crawler(Spider, {**PLAIN, "PROXY_OPERATOR_URL": "http://127.0.0.1:9"}))

    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(middleware_module, "LeaseBook", broken)

    async def open_it() -> None:
        await middleware.spider_opened()

    with pytest.raises(CloseSpider) as raised:
        asyncio.run(open_it())
    assert raised.value.reason == "proxy_operator_start_failed"
    assert middleware.book is None and middleware.failure is not None
