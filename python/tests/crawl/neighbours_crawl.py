"""A real Scrapy crawl through the add-on (ADDONS, as a user sets it up) of the requests a test
names, driven by test/python/scrapy-neighbours.unit.test.ts: the TypeScript side runs the
discovery API, the proxies and the sites, and reads from the sites where each request came
from. This writes, to the file named by CRAWL_RESULT, each request's outcome (its final URL,
status and ``meta['proxy']``, or its error), the crawl's stats and the add-on's log lines.

Environment: DISCOVERY_URL, DISCOVERY_TOKEN, CRAWL_RESULT; REQUESTS, a JSON list of
``{"url": ..., "meta": {...}}``; optional FOLLOW=1 (follow every link of a page) and SETTINGS
(JSON, Scrapy settings over these)."""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from typing import Any

import scrapy
from scrapy import Request
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response

warnings.simplefilter("error")

RESULTS: list[dict[str, Any]] = []
LOG: list[str] = []


class Noted(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        LOG.append(f"{record.levelname} {record.getMessage()}")


class Neighbours(scrapy.Spider):
    name = "neighbours"

    async def start(self):  # type: ignore[override]
        for i, item in enumerate(json.loads(os.environ["REQUESTS"])):
            meta = {**item.get("meta", {}), "case": i}
            yield Request(item["url"], meta=meta, dont_filter=True, callback=self.parse, errback=self.failed)

    def parse(self, response: Response):  # type: ignore[override]
        RESULTS.append(
            {
                "case": response.meta.get("case"),
                "url": response.url,
                "status": response.status,
                "proxy": response.meta.get("proxy"),
            }
        )
        if os.environ.get("FOLLOW") == "1":
            for href in re.findall(r'href="([^"]+)"', response.text):
                yield response.follow(href, callback=self.parse, errback=self.failed, meta={"case": None})

    def failed(self, failure: Any) -> None:
        request = failure.request
        RESULTS.append(
            {
                "case": request.meta.get("case"),
                "url": request.url,
                "error": f"{type(failure.value).__name__}: {failure.value}",
            }
        )


def main() -> None:
    logging.getLogger("proxy_operator").addHandler(Noted())
    settings: dict[str, Any] = {
        "ADDONS": {"proxy_operator.scrapy.Addon": 0},
        "PROXY_OPERATOR_URL": os.environ["DISCOVERY_URL"],
        "PROXY_OPERATOR_TOKEN": os.environ.get("DISCOVERY_TOKEN"),
        "LOG_LEVEL": "WARNING",
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "HTTPERROR_ALLOW_ALL": True,
        "DOWNLOAD_TIMEOUT": 10,
        **json.loads(os.environ.get("SETTINGS", "{}")),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Neighbours)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    with open(os.environ["CRAWL_RESULT"], "w") as out:
        json.dump(
            {
                "results": RESULTS,
                "log": LOG,
                "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str))},
            },
            out,
        )


if __name__ == "__main__":
    main()
