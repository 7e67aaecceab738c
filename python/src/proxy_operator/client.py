"""Clients of the discovery API: ``AsyncDiscoveryClient`` (httpx on asyncio: never blocks an
event loop, so it runs inside Scrapy) and ``DiscoveryClient`` (the same calls, blocking)."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx

from .errors import NO_LEASE_CODES, DiscoveryApiError, NoLease
from .types import Lease, Report, ReportResult

#: How many times a ``429 too_many_requests`` is waited out (its Retry-After) before it is raised.
DEFAULT_TOO_MANY_REQUESTS_RETRIES = 3
#: How many times a ``503`` (``store_unavailable``, or ``outcome_unknown``: the lease store got the
#: write and did not answer in time) is waited out and sent again. Safe for writes: each carries one
#: request id (``Idempotency-Key``) through all its attempts, so the server applies it once.
DEFAULT_UNAVAILABLE_RETRIES = 3
#: A Retry-After longer than this is not waited for: the answer is raised.
MAX_RETRY_WAIT_SECONDS = 60.0
MAX_BATCH = 100
#: The most proxy ids one lease request may exclude (the API's bound).
MAX_EXCLUDED = 100
#: A proxy id as the API answers it (``Lease.proxy_id``): namespace/name, the server's pattern.
PROXY_ID_PATTERN = re.compile(r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9](?:[-.a-z0-9]{0,251}[a-z0-9])?$")


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    body: Mapping[str, Any] | None = None


class _Attempts:
    """One call's attempts: its request id (the same on every attempt of a write) and which answer
    is worth sending again (429 and 503, each a bounded number of times)."""

    def __init__(self, call: _Call, throttled: int, unavailable: int, request_id: str | None) -> None:
        self.headers = {} if call.method == "GET" else {"idempotency-key": request_id or str(uuid.uuid4())}
        self._left = {429: throttled, 503: unavailable}

    def wait(self, response: httpx.Response) -> float | None:
        """Seconds to wait before the next attempt, or None when this answer is the call's."""
        left = self._left.get(response.status_code, 0)
        wait = retry_after_seconds(response.headers.get("retry-after")) or 1.0
        if left <= 0 or wait > MAX_RETRY_WAIT_SECONDS:
            return None
        self._left[response.status_code] = left - 1
        return wait


def _exclude_ids(exclude: Sequence[str] | None, session: str | None) -> list[str]:
    """``exclude`` checked as the server checks it, so a caller's mistake is a ValueError naming
    the field before any call (the server would answer 400 naming it)."""
    if exclude is None:
        return []
    if isinstance(exclude, (str, bytes)):
        raise ValueError(f"exclude must be a sequence of proxy ids (namespace/name), got the string {exclude!r}")
    ids = list(exclude)
    if session is not None:
        raise ValueError("exclude does not go with session: a session keeps its own proxy")
    if len(ids) > MAX_EXCLUDED:
        raise ValueError(f"exclude has {len(ids)} proxy ids; at most {MAX_EXCLUDED}")
    for i, proxy_id in enumerate(ids):
        if not isinstance(proxy_id, str) or not PROXY_ID_PATTERN.match(proxy_id):
            raise ValueError(f"exclude[{i}] must be a proxy id (namespace/name), got {proxy_id!r}")
    return ids


def _lease_body(
    selector: Mapping[str, str] | None,
    target: str | None,
    session: str | None,
    ttl_seconds: int | None,
    exit_ip: str | None,
    exclude: Sequence[str] | None = None,
) -> dict[str, Any]:
    excluded = _exclude_ids(exclude, session)
    body: dict[str, Any] = {}
    if selector:
        body["selector"] = dict(selector)
    if target is not None:
        body["target"] = target
    if session is not None:
        body["session"] = session
    if ttl_seconds is not None:
        body["ttlSeconds"] = ttl_seconds
    if exit_ip is not None:
        body["exitIP"] = exit_ip
    if excluded:  # an empty list excludes nothing: not sent (an operator older than the field accepts the call)
        body["exclude"] = excluded
    return body


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header (delta-seconds or an HTTP date) in seconds, 0..86400, or None."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(min(int(text), 86_400))
    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return float(min(max(when - (time.time() if now is None else now), 0.0), 86_400.0))


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        body = response.json()
        code, message = str(body.get("error", "")), str(body.get("message", ""))
    except ValueError:
        code, message = "", response.text[:200]
    retry_after = retry_after_seconds(response.headers.get("retry-after"))
    if response.status_code == 409 and code in NO_LEASE_CODES:
        raise NoLease(409, code, message, retry_after)
    raise DiscoveryApiError(response.status_code, code or f"http_{response.status_code}", message, retry_after)


def _headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def _leases(body: Any) -> Lease:
    return Lease.from_json(body)


class _Calls:
    """The calls, as data: both clients send them the same way."""

    @staticmethod
    def lease(**kw: Any) -> _Call:
        return _Call("POST", "/v1/leases", _lease_body(**kw))

    @staticmethod
    def renew(lease_id: str, ttl_seconds: int | None) -> _Call:
        return _Call(
            "POST", f"/v1/leases/{quote(lease_id, safe='')}/renew", {} if ttl_seconds is None else {"ttlSeconds": ttl_seconds}
        )

    @staticmethod
    def release(lease_id: str) -> _Call:
        return _Call("DELETE", f"/v1/leases/{quote(lease_id, safe='')}")

    @staticmethod
    def report(report: Report) -> _Call:
        body = report.to_json()
        del body["leaseID"]
        return _Call("POST", f"/v1/leases/{quote(report.lease_id, safe='')}/report", body)

    @staticmethod
    def reports(reports: Iterable[Report]) -> _Call:
        items = [r.to_json() for r in reports]
        if not 1 <= len(items) <= MAX_BATCH:
            raise ValueError(f"reports: 1 to {MAX_BATCH} reports in one call, got {len(items)}")
        return _Call("POST", "/v1/reports", {"reports": items})

    @staticmethod
    def end_session(key: str) -> _Call:
        return _Call("DELETE", f"/v1/sessions/{quote(key, safe='')}")


class AsyncDiscoveryClient:
    """The discovery API on asyncio (httpx). Use it inside an event loop; ``aclose()`` at the end."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 10.0,
        too_many_requests_retries: int = DEFAULT_TOO_MANY_REQUESTS_RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
        unavailable_retries: int = DEFAULT_UNAVAILABLE_RETRIES,
    ) -> None:
        # trust_env=False: the API is reached directly, never through the environment's proxy.
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=_headers(token), timeout=timeout, trust_env=False, transport=transport
        )
        self._retries = too_many_requests_retries
        self._unavailable_retries = unavailable_retries

    async def _send(self, call: _Call, request_id: str | None = None) -> httpx.Response:
        attempts = _Attempts(call, self._retries, self._unavailable_retries, request_id)
        while True:
            response = await self._http.request(call.method, call.path, json=call.body, headers=attempts.headers)
            wait = attempts.wait(response)
            if wait is None:
                _raise_for(response)
                return response
            await asyncio.sleep(wait)

    async def lease(
        self,
        *,
        selector: Mapping[str, str] | None = None,
        target: str | None = None,
        session: str | None = None,
        ttl_seconds: int | None = None,
        exit_ip: str | None = None,
        exclude: Sequence[str] | None = None,
        request_id: str | None = None,
    ) -> Lease:
        """``POST /v1/leases``. Raises NoLease (409) when nothing is leasable. ``exclude``: up to 100
        proxy ids (``Lease.proxy_id``) the server must not give, for a crawler that wants a proxy it
        does not hold yet (every match excluded is 409 ``all_busy``); not with ``session``; a bad
        value is a ValueError naming ``exclude`` before any call. An operator older than the field
        answers 400 (``refused_field(err, "exclude")``). ``request_id`` (every write takes one): the
        call's Idempotency-Key, default a new UUID kept through its retries; the same one again
        after a call that got no answer gets its first outcome."""
        call = _Calls.lease(
            selector=selector, target=target, session=session, ttl_seconds=ttl_seconds, exit_ip=exit_ip, exclude=exclude
        )
        return _leases((await self._send(call, request_id)).json())

    async def renew(self, lease_id: str, ttl_seconds: int | None = None, *, request_id: str | None = None) -> Lease:
        return _leases((await self._send(_Calls.renew(lease_id, ttl_seconds), request_id)).json())

    async def release(self, lease_id: str, *, request_id: str | None = None) -> None:
        """Ends a lease; one that already ended (or expired) is done too (404 lease_not_found)."""
        try:
            await self._send(_Calls.release(lease_id), request_id)
        except DiscoveryApiError as err:
            if err.code != "lease_not_found":
                raise

    async def report(
        self,
        lease_id: str,
        result: ReportResult,
        *,
        target: str | None = None,
        retry_after_seconds: int | None = None,
        release: bool = False,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        report = Report(lease_id, result, target, retry_after_seconds, release)
        body: dict[str, Any] = (await self._send(_Calls.report(report), request_id)).json()
        return body

    async def report_many(self, reports: Iterable[Report], *, request_id: str | None = None) -> list[dict[str, Any]]:
        """``POST /v1/reports`` (1 to 100), one atomic step: each report's answer in order."""
        items: list[dict[str, Any]] = (await self._send(_Calls.reports(reports), request_id)).json()["items"]
        return items

    async def end_session(self, key: str) -> None:
        await self._send(_Calls.end_session(key))

    async def aclose(self) -> None:
        await self._http.aclose()


class DiscoveryClient:
    """The discovery API, blocking (scripts, tools). Never call it from Scrapy's reactor."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 10.0,
        too_many_requests_retries: int = DEFAULT_TOO_MANY_REQUESTS_RETRIES,
        transport: httpx.BaseTransport | None = None,
        unavailable_retries: int = DEFAULT_UNAVAILABLE_RETRIES,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=_headers(token), timeout=timeout, trust_env=False, transport=transport
        )
        self._retries = too_many_requests_retries
        self._unavailable_retries = unavailable_retries

    def _send(self, call: _Call, request_id: str | None = None) -> httpx.Response:
        attempts = _Attempts(call, self._retries, self._unavailable_retries, request_id)
        while True:
            response = self._http.request(call.method, call.path, json=call.body, headers=attempts.headers)
            wait = attempts.wait(response)
            if wait is None:
                _raise_for(response)
                return response
            time.sleep(wait)

    def lease(
        self,
        *,
        selector: Mapping[str, str] | None = None,
        target: str | None = None,
        session: str | None = None,
        ttl_seconds: int | None = None,
        exit_ip: str | None = None,
        exclude: Sequence[str] | None = None,
        request_id: str | None = None,
    ) -> Lease:
        call = _Calls.lease(
            selector=selector, target=target, session=session, ttl_seconds=ttl_seconds, exit_ip=exit_ip, exclude=exclude
        )
        return _leases(self._send(call, request_id).json())

    def renew(self, lease_id: str, ttl_seconds: int | None = None, *, request_id: str | None = None) -> Lease:
        return _leases(self._send(_Calls.renew(lease_id, ttl_seconds), request_id).json())

    def release(self, lease_id: str, *, request_id: str | None = None) -> None:
        """Ends a lease; one that already ended (or expired) is done too (404 lease_not_found)."""
        try:
            self._send(_Calls.release(lease_id), request_id)
        except DiscoveryApiError as err:
            if err.code != "lease_not_found":
                raise

    def report(
        self,
        lease_id: str,
        result: ReportResult,
        *,
        target: str | None = None,
        retry_after_seconds: int | None = None,
        release: bool = False,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = self._send(
            _Calls.report(Report(lease_id, result, target, retry_after_seconds, release)), request_id
        ).json()
        return body

    def report_many(self, reports: Iterable[Report], *, request_id: str | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._send(_Calls.reports(reports), request_id).json()["items"]
        return items

    def end_session(self, key: str) -> None:
        self._send(_Calls.end_session(key))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DiscoveryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
