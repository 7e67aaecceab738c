"""``ADDONS = {"proxy_operator.scrapy.Addon": 0}``: puts the middleware where it belongs, the
send-time check (send_check.py) in front of the project's http and https download handlers, and
the re-route of the requests it stops (reroute.py) above DownloaderStats."""

from __future__ import annotations

from typing import Any

from scrapy.settings import BaseSettings

from .middleware import ProxyOperatorMiddleware
from .reroute import ORDER as REROUTE_ORDER
from .reroute import RerouteMiddleware
from .routes import PROXIED_SCHEMES
from .send_check import HANDLER_PATH, INNER_SETTING, is_the_check

#: After RetryMiddleware (550) and before HttpProxyMiddleware (750), which turns credentials in
#: ``meta['proxy']`` into a Proxy-Authorization header: where scrapy-rotating-proxies sits too.
ORDER = 610


class Addon:
    def update_settings(self, settings: BaseSettings) -> None:
        settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", ProxyOperatorMiddleware, ORDER)
        # Sends again a request the send-time check stopped before DownloaderStats counts an error.
        settings.set_in_component_priority_dict("DOWNLOADER_MIDDLEWARES", RerouteMiddleware, REROUTE_ORDER)
        current = settings.getwithbase("DOWNLOAD_HANDLERS")
        handlers: dict[str, Any] = settings.getdict("DOWNLOAD_HANDLERS")
        inner: dict[str, Any] = settings.getdict(INNER_SETTING)
        for scheme in PROXIED_SCHEMES:
            path = current.get(scheme)
            if path is None or is_the_check(path):
                continue  # disabled by the project (nothing is sent), or already the check
            # The project's own handler (or Scrapy's) still sends the request, after the check.
            inner.setdefault(scheme, path)
            handlers[scheme] = HANDLER_PATH
        settings.set(INNER_SETTING, inner, settings.getpriority(INNER_SETTING) or 0)
        settings.set("DOWNLOAD_HANDLERS", handlers, settings.getpriority("DOWNLOAD_HANDLERS") or 0)
