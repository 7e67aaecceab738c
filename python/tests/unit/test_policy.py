"""The ban policy, as a table: what each answer and each failure says about the proxy."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
)
from scrapy.http import Response
from twisted.internet.error import (
    ConnectionLost,
    ConnectionRefusedError,
    DNSLookupError,
    TCPTimedOutError,
    TimeoutError,
)
from twisted.python.failure import Failure
from twisted.web._newclient import ResponseFailed, ResponseNeverReceived

from proxy_operator.scrapy.middleware import SpiderPolicy
from proxy_operator.scrapy.policy import BanPolicy, response_outcome

REQUEST = Request("https://shop.example/a")


def wrapped(exception: BaseException, cause: BaseException) -> BaseException:
    """As Scrapy raises it: its own exception, Twisted's as the cause."""
    exception.__cause__ = cause
    return exception


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, "ok"),
        (301, "ok"),
        (304, "ok"),
        (401, "banned"),
        (403, "banned"),
        (429, "rate_limited"),
        (404, "other"),  # a missing page says nothing about the proxy
        (500, "other"),
        (502, "other"),  # a healthy proxy answers 502 when the site is down: not unreachable
        (503, "other"),
        (504, "other"),
    ],
)
def test_a_response_reports(status: int, outcome: str) -> None:
    assert response_outcome(BanPolicy(), REQUEST, Response(REQUEST.url, status=status)) == outcome


@pytest.mark.parametrize(
    ("exception", "proxy_failed"),
    [
        (ConnectionRefusedError(), True),  # nothing listens where the proxy should
        (TCPTimedOutError(), True),  # the connection to the proxy timed out
        (ConnectionLost(), True),  # reset by the proxy
        (ResponseNeverReceived([Failure(ConnectionLost())]), True),
        (TunnelError("Could not open CONNECT tunnel with proxy 10.0.0.1:3128 [{'status': 403}]"), True),
        (DownloadConnectionRefusedError("Connection was refused by other side"), True),  # Scrapy 2.14+
        (wrapped(DownloadFailedError("lost"), ResponseFailed([Failure(ConnectionLost())])), True),
        (wrapped(DownloadFailedError("lost"), ResponseFailed([Failure(ValueError("bad gzip"))])), False),
        (DownloadTimeoutError("Getting https://shop.example/a took longer than 10 seconds."), False),
        (CannotResolveHostError("proxy.invalid"), False),
        (TimeoutError(), False),  # the download timed out: a slow site looks the same
        (DNSLookupError(), False),
        (ValueError("a bug in a callback"), False),
    ],
)
def test_an_exception_is_a_ban_when_the_proxy_itself_failed(exception: BaseException, proxy_failed: bool) -> None:
    assert BanPolicy().exception_is_ban(REQUEST, exception) is proxy_failed


class Spider:
    """A spider with its own rule, as scrapy-rotating-proxies allows."""

    def response_is_ban(self, request: Request, response: Response) -> bool:
        return b"captcha" in response.body


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (200, b"<p>captcha</p>", "banned"),
        (200, b"<p>page</p>", "ok"),
        (403, b"forbidden", "other"),  # the spider's rule replaces the default one: no ban
        (429, b"slow down", "rate_limited"),  # what the spider does not define stays the policy's
    ],
)
def test_spider_methods_override_the_policy(status: int, body: bytes, outcome: str) -> None:
    policy = SpiderPolicy(Spider(), BanPolicy())
    assert response_outcome(policy, REQUEST, Response(REQUEST.url, status=status, body=body)) == outcome


class NoWafPolicy(BanPolicy):
    BAN_STATUSES = frozenset({403, 451})


def test_a_subclass_changes_the_codes() -> None:
    assert response_outcome(NoWafPolicy(), REQUEST, Response(REQUEST.url, status=451)) == "banned"
    assert response_outcome(NoWafPolicy(), REQUEST, Response(REQUEST.url, status=401)) == "other"
