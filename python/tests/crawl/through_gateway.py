"""Scrapy pointed at one proxy URL with nothing but its own HttpProxyMiddleware: every request
carries ``meta["proxy"] = "http://<username>:<token>@gateway:port"`` (Scrapy moves the URL's
credentials into Proxy-Authorization itself, on the CONNECT too for https), as a Scrapy user
sets up the gateway (docs/gateway.md). Driven by test/gateway/real-clients.int.test.ts.

    python through_gateway.py PROXY_URL COUNT URL [URL ...]

Fetches COUNT requests (the URLs in turn), one at a time, no retries (a failure the gateway did
not hide stays a failure), and prints a JSON list in request order: ``{"status", "body"}`` per
answer (every status reaches the callback), ``{"status": 0, "error"}`` per failed request.
DELAY (env) is Scrapy's DOWNLOAD_DELAY between them."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response


def main() -> None:
    proxy, count, urls = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    results: list[dict[str, Any] | None] = [None] * count

    class ThroughGateway(scrapy.Spider):
        name = "through_gateway"

        async def start(self):  # type: ignore[override]
            for i in range(count):
                yield scrapy.Request(
                    urls[i % len(urls)],
                    meta={"proxy": proxy, "handle_httpstatus_all": True, "i": i},
                    dont_filter=True,
                    callback=self.parse,
                    errback=self.failed,
                )

        def parse(self, response: Response) -> None:  # type: ignore[override]
            results[response.meta["i"]] = {"status": response.status, "body": response.body.decode()}

        def failed(self, failure: Any) -> None:
            results[failure.request.meta["i"]] = {"status": 0, "error": repr(failure.value)}

    process = CrawlerProcess(
        {
            "LOG_LEVEL": "ERROR",
            "ROBOTSTXT_OBEY": False,
            "TELNETCONSOLE_ENABLED": False,
            "RETRY_ENABLED": False,
            "CONCURRENT_REQUESTS": 1,
            "DOWNLOAD_DELAY": float(os.environ.get("DELAY", "0")),
            "DOWNLOAD_TIMEOUT": 20,
        }
    )
    process.crawl(ThroughGateway)
    process.start()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
