"""The add-on and the middleware settings, on the current Scrapy, without a warning (pytest
makes every warning an error: see pyproject.toml)."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from proxy_operator.scrapy import Addon, ProxyOperatorMiddleware
from proxy_operator.scrapy.addon import ORDER

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


def test_without_the_api_url_it_says_which_setting_is_missing() -> None:
    crawler = get_crawler(Spider, {})
    with pytest.raises(NotConfigured, match="PROXY_OPERATOR_URL"):
        ProxyOperatorMiddleware.from_crawler(crawler)
