"""The close does not wait for lease asks stuck in the client's 503 retries (a minute each)."""

from __future__ import annotations

import asyncio
import time

from proxy_operator import Lease, NoLease
from proxy_operator.scrapy.leases import BookOptions, LeaseBook


class Stuck:
    """A lease ask that waits out 503s for a long time (as the client does with Retry-After)."""

    async def lease(self, **kw: object) -> Lease:
        await asyncio.sleep(30)
        raise AssertionError("unreachable")


def test_the_close_cancels_asks_stuck_in_retries() -> None:
    book = LeaseBook(Stuck(), BookOptions(max_wait_seconds=60), time.monotonic)  # type: ignore[arg-type]

    async def run() -> tuple[float, str]:
        waiting = asyncio.ensure_future(book.acquire("shop.example"))
        await asyncio.sleep(0.1)  # the ask is out
        started = time.monotonic()
        await asyncio.wait_for(book.close(), timeout=5)
        try:
            await waiting
        except NoLease as err:
            return time.monotonic() - started, err.message
        raise AssertionError("a lease came")

    seconds, message = asyncio.run(run())
    assert seconds < 1.0
    assert message == "the crawl's leases are closed"
