"""The lease book's calls whose failure does not stop the crawl: reports, releases and the ends
of sessions. Each is awaited on the event loop; a failure is logged (a lease not released
expires at its TTL, an ok report lost is a count) and counted in the book's stats when it lands."""

from __future__ import annotations

import asyncio
import logging

from ..errors import DiscoveryApiError
from ..types import Report, ReportResult
from .lease_api import LeaseApi
from .lease_state import BookStats, HeldLease

log = logging.getLogger("proxy_operator")

#: The most reports one ``POST /v1/reports`` carries (the API's bound).
BATCH = 100
#: A ban or unreachable report that failed is sent again this many times in all, waiting 1, 2,
#: 4, ... seconds (at most MAX_REPORT_BACKOFF) between tries (beside the client's own waits for
#: 429 and 503); the book's close waits for them a bounded time.
REPORT_ATTEMPTS = 5
MAX_REPORT_BACKOFF = 8.0


def described(err: BaseException) -> str:
    """An error as a log line says it: its type too (httpx's timeouts have no message: a bare
    ``str(err)`` logged "reporting banned failed (sent again): " with nothing after it)."""
    if isinstance(err, DiscoveryApiError):
        return str(err)  # the API's status, code and message
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class ApiCalls:
    def __init__(self, api: LeaseApi, stats: BookStats) -> None:
        self.api = api
        self.stats = stats

    async def report(
        self, held: HeldLease, result: ReportResult, *, retry_after_seconds: int | None = None, release: bool = False
    ) -> None:
        try:
            await self.api.report(
                held.lease.lease_id, result, target=held.host, retry_after_seconds=retry_after_seconds, release=release
            )
            if release:
                self.stats.released += 1
        except Exception as err:  # noqa: BLE001 - the request goes on; the lease expires on its own
            log.warning("proxy-operator: reporting %s failed: %s", result, described(err))

    async def deliver(self, held: HeldLease, result: ReportResult) -> bool:
        """A report that takes the proxy out (banned, unreachable), with the lease's release, sent
        until the server has it: True once it has, False when it refused it (a 4xx: the lease
        has ended, nothing to report on) or every try failed."""
        for attempt in range(REPORT_ATTEMPTS):
            try:
                await self.api.report(held.lease.lease_id, result, target=held.host, release=True)
                self.stats.released += 1
                return True
            except DiscoveryApiError as err:
                if 400 <= err.status < 500 and err.status not in (408, 429):
                    log.warning("proxy-operator: the %s report was refused: %s", result, described(err))
                    return False
                failure: Exception = err
            except Exception as err:  # noqa: BLE001 - the API down: sent again
                failure = err
            if attempt + 1 < REPORT_ATTEMPTS:
                log.warning("proxy-operator: reporting %s failed (sent again): %s", result, described(failure))
                await asyncio.sleep(min(2.0**attempt, MAX_REPORT_BACKOFF))
        log.warning("proxy-operator: reporting %s failed %d times: %s", result, REPORT_ATTEMPTS, described(failure))
        return False

    async def send_reports(self, reports: list[Report]) -> None:
        for start in range(0, len(reports), BATCH):
            chunk = reports[start : start + BATCH]
            try:
                await self.api.report_many(chunk)
                self.stats.reported_ok += sum(1 for r in chunk if r.result == "ok")
                self.stats.released += sum(1 for r in chunk if r.release)
            except Exception as err:  # noqa: BLE001 - an ok report lost is a count, not a fault
                log.warning("proxy-operator: %d batched reports failed: %s", len(chunk), described(err))

    async def release_held(self, held: HeldLease) -> None:
        """Released, with its last ok report when it has successes not yet reported."""
        if held.ok_pending:
            held.ok_pending = 0
            await self.send_reports([Report(held.lease.lease_id, "ok", held.host, release=True)])
        else:
            await self.release(held.lease.lease_id)

    async def release(self, lease_id: str) -> None:
        try:
            await self.api.release(lease_id)
            self.stats.released += 1
        except Exception as err:  # noqa: BLE001 - it expires at its TTL
            log.warning("proxy-operator: releasing a lease failed: %s", described(err))

    async def end_session(self, key: str) -> None:
        try:
            await self.api.end_session(key)
        except Exception as err:  # noqa: BLE001
            log.warning("proxy-operator: ending session %s failed: %s", key, described(err))
