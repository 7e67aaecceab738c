"""What a response or an exception says about the proxy that carried it: the ban policy, in the
shape scrapy-rotating-proxies users know (``response_is_ban``, ``exception_is_ban``), plus the
rate limit. Override it with ``PROXY_OPERATOR_BAN_POLICY`` (a class path) or with spider
methods of the same names."""

from __future__ import annotations

from typing import Literal, Protocol

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.exceptions import CannotResolveHostError, DownloadConnectionRefusedError, DownloadTimeoutError
from scrapy.http import Response
from twisted.internet.error import (
    ConnectError,
    ConnectionDone,
    ConnectionLost,
    ConnectionRefusedError,
    DNSLookupError,
    TCPTimedOutError,
    TimeoutError,
)
from twisted.web._newclient import ResponseFailed, ResponseNeverReceived

Outcome = Literal["ok", "banned", "rate_limited", "unreachable", "other"]


class Policy(Protocol):
    def response_is_ban(self, request: Request, response: Response) -> bool: ...
    def response_is_rate_limit(self, request: Request, response: Response) -> bool: ...
    def exception_is_ban(self, request: Request, exception: BaseException) -> bool: ...


class BanPolicy:
    """The default policy.

    - A ban is a status the site answers a blocked address with: 401 or 403 (not a 404, not a
      5xx: those say nothing about the proxy).
    - A rate limit is a 429; its Retry-After is honoured.
    - ``exception_is_ban`` means the proxy itself failed, reported ``unreachable``: the
      connection to the proxy was refused, reset or timed out in the kernel (ETIMEDOUT), or the proxy
      refused a CONNECT (TunnelError). A download timeout is not one (a slow site times out
      the same way), and neither is a status the proxy relayed: a 502 from a healthy proxy
      means the site is down.
    """

    BAN_STATUSES: frozenset[int] = frozenset({401, 403})
    RATE_LIMIT_STATUSES: frozenset[int] = frozenset({429})
    PROXY_FAILURES: tuple[type[BaseException], ...] = (
        ConnectionRefusedError,
        TCPTimedOutError,
        ConnectionLost,
        ConnectionDone,
        TunnelError,
    )

    def response_is_ban(self, request: Request, response: Response) -> bool:
        return response.status in self.BAN_STATUSES

    def response_is_rate_limit(self, request: Request, response: Response) -> bool:
        return response.status in self.RATE_LIMIT_STATUSES

    def exception_is_ban(self, request: Request, exception: BaseException) -> bool:
        # Scrapy (2.14+) raises its own exceptions with Twisted's as the cause: the chain is read.
        cause: BaseException | None = exception
        for _ in range(5):
            if cause is None:
                return False
            if isinstance(cause, (DownloadTimeoutError, CannotResolveHostError, DNSLookupError)):
                # A slow site times out the same way; the proxy's own name not resolving is a
                # configuration error, not a dead proxy.
                return False
            if isinstance(cause, DownloadConnectionRefusedError):
                return True
            if isinstance(cause, (ResponseNeverReceived, ResponseFailed)):
                # twisted wraps a connection lost before or during the answer: reset by the proxy.
                return any(self._is_failure(reason.value) for reason in cause.reasons)
            if self._is_failure(cause):
                return True
            cause = cause.__cause__
        return False

    def _is_failure(self, exception: BaseException) -> bool:
        if isinstance(exception, TimeoutError):
            # Scrapy's DOWNLOAD_TIMEOUT (and a connect that outlasts it) raise this one: a slow
            # site looks the same, so it is RetryMiddleware's, not a report.
            return False
        if isinstance(exception, ConnectError) and not isinstance(exception, DNSLookupError):
            return True
        return isinstance(exception, self.PROXY_FAILURES)


def response_outcome(policy: Policy, request: Request, response: Response) -> Outcome:
    """The report a response makes: a ban or a rate limit by the policy; any other status below
    400 a success; other 4xx/5xx nothing (a missing page, a broken site)."""
    if policy.response_is_ban(request, response):
        return "banned"
    if policy.response_is_rate_limit(request, response):
        return "rate_limited"
    return "ok" if response.status < 400 else "other"
