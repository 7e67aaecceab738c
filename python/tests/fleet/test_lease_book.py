"""The Scrapy add-on's lease book beside another team's load, against the real discovery API
(issue 48). Team B holds leases on p1..p3, so p0 is the least used proxy of the four. Team A's
crawl of one site leases p0, and asks for more as its requests pile up: each ask excludes the
proxies the site holds, so each grant is a proxy new to it until a refusal says none is left.
Before, the book asked without excluding and took a grant of a proxy it held (p0 again: the
least used, counting B's leases) for "the site's leases cover the fleet": it stopped at one.
And a pace one sticky session learned from a 429 is where the host's other sessions start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

import pytest
from fleet_env import PROXIES, Fleet

from proxy_operator import AsyncDiscoveryClient, DiscoveryApiError, Lease
from proxy_operator.scrapy.leases import BookOptions, LeaseBook

HOST = "shop.example"


class RecordingClient(AsyncDiscoveryClient):
    """The real client, each lease request noted: what it excluded and what came back."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(url, token=token)
        self.asks: list[tuple[list[str], str]] = []

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
        try:
            lease = await super().lease(
                selector=selector,
                target=target,
                session=session,
                ttl_seconds=ttl_seconds,
                exit_ip=exit_ip,
                exclude=exclude,
                request_id=request_id,
            )
        except DiscoveryApiError as err:
            self.asks.append((sorted(exclude or []), f"{err.status} {err.code}"))
            raise
        self.asks.append((sorted(exclude or []), lease.proxy_id))
        return lease


async def other_teams_load(fleet: Fleet) -> tuple[AsyncDiscoveryClient, list[Lease]]:
    """Team B's six leases, two on each of p1..p3 (it excludes p0 to put them there)."""
    other = AsyncDiscoveryClient(fleet.url, token=fleet.other_token)
    leases = [await other.lease(target="theirs.example", exclude=["fleet/p0"], ttl_seconds=120) for _ in range(6)]
    assert sorted(lease.proxy_id for lease in leases) == sorted(PROXIES[1:] * 2)
    return other, leases


async def crawl(book: LeaseBook, seconds: float = 2.0) -> set[str]:
    """Requests to HOST that never end, one every 20 ms for ``seconds``: with one request per
    lease, each finds its site's leases busy and the site asks for one more. The proxies the
    site holds at the end."""
    first = await book.acquire(HOST)
    book.succeeded(first)  # a page came back through it: it carries any number of requests
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await book.acquire(HOST)
        await asyncio.sleep(0.02)
    return {held.proxy_id for held in book.sites[(HOST, None)].leases if not held.gone}


def test_beside_another_teams_load_the_site_spreads_over_every_proxy(fleet: Fleet) -> None:
    async def run() -> None:
        other, theirs = await other_teams_load(fleet)
        client = RecordingClient(fleet.url, fleet.token)
        book = LeaseBook(client, BookOptions(requests_per_lease=1), time.monotonic)
        try:
            assert await crawl(book) == set(PROXIES)
            # p0 first (the least used), then one new proxy per ask, each ask excluding exactly
            # what the site held; every proxy excluded, the server refused: covered, no more asks.
            granted = [answer for _, answer in client.asks]
            assert len(granted) == 5 and granted[0] == "fleet/p0"
            assert set(granted[:4]) == set(PROXIES) and granted[4] == "409 all_busy"
            for i, (excluded, _) in enumerate(client.asks):
                assert excluded == sorted(granted[:i])
            assert book.sites[(HOST, None)].saturated_until > time.monotonic()
            assert book.stats.leased == 4 and book.stats.refused == 1
        finally:
            await book.close()
            for lease in theirs:
                await other.release(lease.lease_id)
            await client.aclose()
            await other.aclose()
        assert book.stats.released == 4

    asyncio.run(run())


def test_against_an_operator_older_than_exclude_it_asks_without_it_and_warns_once(
    fleet: Fleet, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> None:
        other, theirs = await other_teams_load(fleet)
        client = RecordingClient(fleet.predating_url, fleet.token)
        book = LeaseBook(client, BookOptions(requests_per_lease=1), time.monotonic)
        try:
            with caplog.at_level(logging.WARNING, logger="proxy_operator"):
                held = await crawl(book)
            # The old reading: the least used proxy (p0, counting B's leases) is one the site
            # holds, so it stops asking. No request failed, and only the one ask sent exclude.
            assert held == {"fleet/p0"}
            assert client.asks == [
                ([], "fleet/p0"),
                (["fleet/p0"], "400 invalid_request"),
                ([], "fleet/p0"),
            ]
            assert book.exclude_supported is False
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert warnings == ["proxy-operator: the discovery API predates exclude on a lease: asking without it"]
        finally:
            await book.close()
            for lease in theirs:
                await other.release(lease.lease_id)
            await client.aclose()
            await other.aclose()

    asyncio.run(run())


def test_a_pace_one_session_learned_is_where_every_session_of_the_host_starts(fleet: Fleet) -> None:
    # A site limits each source alike: a 429 through one sticky session's proxy teaches the
    # host's pace to the other sessions' leases, held already or granted later. Before, each
    # session started unpaced and found the limit by a 429 (and a retry) of its own.
    async def run() -> None:
        client = AsyncDiscoveryClient(fleet.url, token=fleet.token)
        book = LeaseBook(client, BookOptions(), time.monotonic)
        try:
            first = await book.acquire(HOST, "s1")
            other = await book.acquire(HOST, "s2")
            now = time.monotonic()
            for _ in range(5):
                book.succeeded(first, now - 0.5)
            first.in_flight += 1
            book.rate_limited(first, None, now)
            assert first.pace.rate is not None
            assert other.pace.rate == first.pace.rate
            later = await book.acquire(HOST, "s3")
            assert later is not first and later is not other
            assert later.pace.rate == first.pace.rate
            assert book.stats.reported_rate_limited == 1
        finally:
            await book.close()
            await client.aclose()

    asyncio.run(run())
