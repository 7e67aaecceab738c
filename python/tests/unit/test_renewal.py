"""When a held lease is renewed, released or kept, as tables; and, for every TTL, that a lease
in use is renewed with time to spare (the book ticked as the middleware ticks it)."""

from __future__ import annotations

import asyncio

import pytest

from proxy_operator import Lease
from proxy_operator.scrapy.leases import BookOptions, LeaseBook
from proxy_operator.scrapy.renewal import RenewalTiming, renewal_action, renewal_timing


@pytest.mark.parametrize(
    ("seconds_left", "used", "action"),
    [
        (100.0, True, "keep"),
        (41.0, True, "keep"),
        (40.0, True, "renew"),  # a third of the TTL left, and in use
        (10.0, True, "renew"),
        (40.0, False, "release"),  # unused since its last renewal: given back
        (0.0, False, "release"),
        (100.0, False, "keep"),
    ],
)
def test_a_third_of_the_ttl_left(seconds_left: float, used: bool, action: str) -> None:
    assert renewal_action(1000.0, 1000.0 + seconds_left, 120.0, used) == action


@pytest.mark.parametrize(
    ("ttl", "timing", "latest_left"),
    [
        # ttl: (tick, lead), and the least time left when a renewal starts (lead - tick): at
        # least a second for the call, or a third of a TTL under 3 s. Before: a 1 s tick and a
        # lead of ttl/3, so a TTL of 3 s was renewed with 0 s left and one of 1 or 2 s expired
        # between two ticks.
        (1, RenewalTiming(1 / 6, 0.5), 1 / 3),
        (2, RenewalTiming(1 / 3, 1.0), 2 / 3),
        (3, RenewalTiming(0.5, 1.5), 1.0),
        (5, RenewalTiming(5 / 6, 5 / 6 + 1.0), 1.0),
        (30, RenewalTiming(1.0, 10.0), 9.0),
        (300, RenewalTiming(1.0, 100.0), 99.0),
    ],
)
def test_the_renewal_schedule_scales_with_the_ttl(ttl: int, timing: RenewalTiming, latest_left: float) -> None:
    got = renewal_timing(float(ttl))
    assert got.tick == pytest.approx(timing.tick)
    assert got.lead == pytest.approx(timing.lead)
    assert got.lead - got.tick == pytest.approx(latest_left)
    assert latest_left >= min(1.0, ttl / 3) - 1e-9


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Server:
    """A lease's expiry as the server keeps it: each grant or renewal sets it a TTL from then."""

    def __init__(self, clock: Clock, ttl: float) -> None:
        self.clock, self.ttl = clock, ttl
        self.expires_at = 0.0
        self.left_at_renewal: list[float] = []

    async def lease(self, **kw: object) -> Lease:
        self.expires_at = self.clock.now + self.ttl
        return Lease("lease-1", "ns/p0", "http://127.0.0.1:3128", "2026-01-01T00:00:00Z", "shop.example")

    async def renew(self, lease_id: str, ttl_seconds: int | None = None) -> Lease:
        assert self.clock.now < self.expires_at, "renewed after the lease expired"
        self.left_at_renewal.append(self.expires_at - self.clock.now)
        self.expires_at = self.clock.now + self.ttl
        return Lease(lease_id, "ns/p0", "http://127.0.0.1:3128", "2026-01-01T00:00:00Z", "shop.example")

    async def report_many(self, reports: object) -> list[object]:
        return []


@pytest.mark.parametrize("ttl", [1, 2, 3, 5, 30, 300])
def test_a_lease_in_use_is_renewed_with_time_left_for_the_call(ttl: int) -> None:
    clock = Clock()
    server = Server(clock, float(ttl))
    book = LeaseBook(server, BookOptions(ttl_seconds=ttl), clock)  # type: ignore[arg-type]

    async def crawl() -> None:
        held = await book.acquire("shop.example")  # carried through every tick: always in use
        assert held.in_flight == 1
        clock.now += 0.6 * book.tick_seconds  # the ticks fall anywhere within the lease's time
        for _ in range(round(10 * ttl / book.tick_seconds)):  # ten TTLs
            clock.now += book.tick_seconds
            book.tick()
            for _ in range(3):
                await asyncio.sleep(0)  # the renewal call runs, answered at once

    asyncio.run(crawl())
    assert len(server.left_at_renewal) >= 9
    assert min(server.left_at_renewal) >= min(1.0, ttl / 3) - 1e-6
