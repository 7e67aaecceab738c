"""The add-on and the middleware settings, on the current Scrapy, without a warning (pytest
makes every warning an error: see pyproject.toml)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from proxy_operator.scrapy import Addon, ProxyOperatorMiddleware
from proxy_operator.scrapy.addon import ORDER
from proxy_operator.scrapy.settings import SettingError

HERE = Path(__file__).parent

MIDDLEWARE = "proxy_operator.scrapy.ProxyOperatorMiddleware"


def middlewares(crawler) -> list[object]:  # type: ignore[no-untyped-def]
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager

    return list(DownloaderMiddlewareManager.from_crawler(crawler).middlewares)


def test_the_addon_inserts_the_middleware_between_retry_and_http_proxy() -> None:
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}, "PROXY_OPERATOR_URL": "http://127.0.0.1:8090"})
    crawler._apply_settings()
    assert crawler.settings.getdict("DOWNLOADER_MIDDLEWARES")[ProxyOperatorMiddleware] == ORDER
    names = [type(m).__name__ for m in middlewares(crawler)]
    assert names.index("RetryMiddleware") < names.index("ProxyOperatorMiddleware") < names.index("HttpProxyMiddleware")


def test_the_plain_middleware_setting_works_too() -> None:
    crawler = get_crawler(
        Spider,
        {"DOWNLOADER_MIDDLEWARES": {MIDDLEWARE: 610}, "PROXY_OPERATOR_URL": "http://127.0.0.1:8090"},
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
