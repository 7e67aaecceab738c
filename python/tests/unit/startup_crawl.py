"""``python startup_crawl.py '<settings json>'``: one real Scrapy crawl (CrawlerProcess) of three
pages of a loopback site with the add-on enabled and the given settings, the discovery API a
port nothing listens on. Prints one JSON line: how many requests reached the site (any is a
request sent without a proxy: no proxy exists here) and the crawl's finish reason."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess

HITS: list[str] = []


class Site(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        HITS.append(self.path)
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class FailingClient:
    """A PROXY_OPERATOR_CLIENT whose constructor fails."""

    def __init__(self, url: str, token: str | None = None) -> None:
        raise ConnectionError("no credentials file")


def main() -> None:
    site = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    site.daemon_threads = True
    threading.Thread(target=site.serve_forever, daemon=True).start()
    start = f"http://127.0.0.1:{site.server_address[1]}"

    class Spider(scrapy.Spider):
        name = "startup"

        async def start(self) -> Any:
            for i in range(3):
                yield scrapy.Request(f"{start}/p{i}", dont_filter=True)

        def parse(self, response: Any) -> None:
            pass

    settings: dict[str, Any] = {
        "ADDONS": {"proxy_operator.scrapy.Addon": 0},
        "PROXY_OPERATOR_URL": "http://127.0.0.1:9",
        "PROXY_OPERATOR_MAX_WAIT": 2,
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
    }
    for key, value in json.loads(sys.argv[1]).items():
        if value is None:
            settings.pop(key, None)
        else:
            settings[key] = value
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Spider)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    print(json.dumps({"site_hits": len(HITS), "finish_reason": stats.get("finish_reason")}))


if __name__ == "__main__":
    main()
