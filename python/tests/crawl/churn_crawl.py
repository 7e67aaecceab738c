"""A real Scrapy crawl through the add-on, driven by test/python/scrapy-churn.int.test.ts: the
TypeScript side runs the operator, the proxies and the site (and injects the faults); this
crawls the site with the add-on as a user would set it up, and writes what it saw as JSON
(pages, every attempt with its proxy and times, when each unreachable report was sent, the
add-on's stats) to the file named by CRAWL_RESULT.

Environment: DISCOVERY_URL, DISCOVERY_TOKEN (optional), START_URL, SELECTOR (JSON),
CRAWL_RESULT; optional DOWNLOAD_DELAY, PROXY_OPERATOR_TTL and CONCURRENT_REQUESTS. With SIDE=rotating (bench/crawl-scrapy.ts's baseline) the same crawl runs through
scrapy-rotating-proxies over PROXY_URLS (comma-separated), set up as its README says."""

from __future__ import annotations

import json
import os
import re
import resource
import time
import warnings
from typing import Any

import scrapy
from scrapy import Request
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response

from proxy_operator import AsyncDiscoveryClient, DiscoveryApiError

SIDE = os.environ.get("SIDE", "addon")
# The add-on and Scrapy must run without a single deprecation warning (scrapy-rotating-proxies
# prints some on Scrapy 2.19: the baseline is run as it is).
if SIDE == "addon":
    warnings.simplefilter("error")

ATTEMPTS: list[dict[str, Any]] = []
#: Every request as Scrapy's HTTP handler sends it (after its wait in the download slot).
SENDS: list[dict[str, Any]] = []
UNREACHABLE_SENT: dict[str, float] = {}
#: Proxy URL -> when the crawl first saw a 403 through it; lease id -> when its renewal got a 404.
BANNED_AT: dict[str, float] = {}
ENDED_AT: dict[str, float] = {}
#: URL -> when a 403 for it came back; and, for each, how long until its retry set out.
BANNED_URL_AT: dict[str, float] = {}
RETRY_LAGS: list[float] = []
FETCHED: set[str] = set()
FAILED: list[str] = []


def now_ms() -> float:
    return time.time() * 1000


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class RecordingClient(AsyncDiscoveryClient):
    """The real client, noting when the first unreachable report of each proxy was sent."""

    async def report(self, lease_id: str, result: Any, **kw: Any) -> dict[str, Any]:
        sent = now_ms()
        answer = await super().report(lease_id, result, **kw)
        if result == "unreachable":
            UNREACHABLE_SENT.setdefault(str(answer["proxyID"]), sent)
        return answer

    async def renew(self, lease_id: str, ttl_seconds: int | None = None, **kw: Any) -> Any:
        try:
            return await super().renew(lease_id, ttl_seconds, **kw)
        except DiscoveryApiError as err:
            if err.status == 404:
                ENDED_AT.setdefault(lease_id, now_ms())
            raise


class SendLog(HTTP11DownloadHandler):
    """Scrapy's HTTP handler, noting each request it sends: its proxy, its lease, when. The
    add-on's send-time check wraps it (as it wraps a project's own handler)."""

    async def download_request(self, request: Request) -> Response:
        held = request.meta.get("proxy_operator_lease")
        lease = held.lease.lease_id if held is not None else None
        SENDS.append({"proxy": request.meta.get("proxy") or "", "lease": lease, "at": now_ms()})
        return await super().download_request(request)


class AttemptLog:
    """After the add-on (610) and HttpProxyMiddleware (750): every request that goes out, with
    its proxy, when it went and when it ended."""

    async def process_request(self, request: Request) -> None:
        proxy = request.meta.get("proxy")
        attempt = {"proxy": proxy or "", "startedAt": now_ms(), "endedAt": None}
        banned_at = BANNED_URL_AT.pop(request.url, None)
        if banned_at is not None:
            RETRY_LAGS.append(attempt["startedAt"] - banned_at)
        request.meta["_attempt"] = attempt
        ATTEMPTS.append(attempt)

    async def process_response(self, request: Request, response: Response) -> Response:
        request.meta["_attempt"]["endedAt"] = now_ms()
        if response.status == 403:  # before the add-on (610) hears of it
            BANNED_AT.setdefault(request.meta.get("proxy") or "", now_ms())
            BANNED_URL_AT[request.url] = now_ms()
        return response

    async def process_exception(self, request: Request, exception: Exception) -> None:
        request.meta["_attempt"]["endedAt"] = now_ms()


class Pages(scrapy.Spider):
    name = "pages"

    async def start(self):  # type: ignore[override]
        yield Request(os.environ["START_URL"], callback=self.parse, errback=self.failed)

    def parse(self, response: Response):  # type: ignore[override]
        FETCHED.add(response.url)
        for href in re.findall(r'href="([^"]+)"', response.text):
            yield response.follow(href, callback=self.parse, errback=self.failed)

    def failed(self, failure: Any) -> None:
        FAILED.append(repr(failure.value))


def proxy_settings() -> dict[str, Any]:
    if SIDE == "rotating":
        return {
            "ROTATING_PROXY_LIST": os.environ["PROXY_URLS"].split(","),
            "DOWNLOADER_MIDDLEWARES": {
                "rotating_proxies.middlewares.RotatingProxyMiddleware": 610,
                "rotating_proxies.middlewares.BanDetectionMiddleware": 620,
                AttemptLog: 800,
            },
        }
    return {
        "ADDONS": {"proxy_operator.scrapy.Addon": 0},
        "PROXY_OPERATOR_URL": os.environ["DISCOVERY_URL"],
        "PROXY_OPERATOR_TOKEN": os.environ.get("DISCOVERY_TOKEN"),
        "PROXY_OPERATOR_SELECTOR": json.loads(os.environ.get("SELECTOR", "{}")),
        "PROXY_OPERATOR_CLIENT": RecordingClient,
        "PROXY_OPERATOR_TTL": os.environ.get("PROXY_OPERATOR_TTL"),
        "DOWNLOADER_MIDDLEWARES": {AttemptLog: 800},
        "DOWNLOAD_HANDLERS": {"http": SendLog, "https": SendLog},
    }


def main() -> None:
    settings = {
        **proxy_settings(),
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO"),
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "CONCURRENT_REQUESTS": int(os.environ.get("CONCURRENT_REQUESTS", "16")),
        "DOWNLOAD_TIMEOUT": 10,
        "DOWNLOAD_DELAY": float(os.environ.get("DOWNLOAD_DELAY", "0")),
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Pages)
    started, cpu_started = now_ms(), cpu_seconds()
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    result = {
        "fetched": len(FETCHED),
        "failed": FAILED,
        "startedAt": started,
        "seconds": (now_ms() - started) / 1000,
        # The crawl process's own CPU time (user + system): what it cost beside how long it took.
        "cpuSeconds": cpu_seconds() - cpu_started,
        "attempts": ATTEMPTS,
        "unreachableSent": UNREACHABLE_SENT,
        "sends": len(SENDS),
        # Requests sent through a proxy after a 403 through it, or through a lease after its
        # renewal got a 404: each a request the add-on should have re-routed.
        "sentAfterBan": sum(1 for x in SENDS if x["proxy"] in BANNED_AT and x["at"] > BANNED_AT[x["proxy"]]),
        "sentAfterEnd": sum(1 for x in SENDS if x["lease"] in ENDED_AT and x["at"] > ENDED_AT[x["lease"]]),
        "bans": len(BANNED_AT),
        # The longest a banned answer took to become its retry (ms): the add-on's response path.
        "maxRetryLagMs": max(RETRY_LAGS, default=0.0),
        "ended": len(ENDED_AT),
        "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str))},
    }
    with open(os.environ["CRAWL_RESULT"], "w") as out:
        json.dump(result, out)


if __name__ == "__main__":
    main()
