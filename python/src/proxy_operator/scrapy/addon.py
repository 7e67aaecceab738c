"""``ADDONS = {"proxy_operator.scrapy.Addon": 0}``: puts the middleware where it belongs."""

from __future__ import annotations

from scrapy.settings import BaseSettings

from .middleware import ProxyOperatorMiddleware

#: After RetryMiddleware (550) and before HttpProxyMiddleware (750), which turns credentials in
#: ``meta['proxy']`` into a Proxy-Authorization header: where scrapy-rotating-proxies sits too.
ORDER = 610


class Addon:
    def update_settings(self, settings: BaseSettings) -> None:
        settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", ProxyOperatorMiddleware, ORDER)
