"""How a site's requests share its leases, as tables."""

from __future__ import annotations

import pytest

from proxy_operator import Lease
from proxy_operator.scrapy.leases import BookOptions, HeldLease, choose, wants_another
from proxy_operator.scrapy.pace import Pace

NOW = 100.0


def held(
    name: str, in_flight: int = 0, proven: bool = True, rest_until: float = 0.0, gone: bool = False, next_turn: float | None = None
) -> HeldLease:
    lease = Lease(f"lease-{name}", f"ns/{name}", f"http://{name}:3128", "2026-01-01T00:00:00Z", "shop.example")
    h = HeldLease(lease, ("shop.example", None), 120.0, NOW + 120.0)
    if next_turn is not None:  # a pace of 10 per second, its next turn this long from now
        h.pace = Pace(rate=10.0, ceiling=10.0, due=NOW + next_turn, limited_at=NOW - 5)
    h.in_flight, h.proven, h.rest_until, h.gone = in_flight, proven, rest_until, gone
    return h


@pytest.mark.parametrize(
    ("leases", "chosen"),
    [
        ([], None),
        ([held("a", 3), held("b", 1), held("c", 2)], "b"),  # the least busy
        ([held("a", 0, rest_until=NOW + 1), held("b", 5)], "b"),  # a resting proxy (Retry-After) is skipped
        ([held("a", 0, rest_until=NOW)], "a"),  # its rest is over
        ([held("a", 1, proven=False), held("b", 4)], "b"),  # a new lease carries one request until a page is back
        ([held("a", 0, proven=False), held("b", 4)], "a"),
        ([held("a", 0, gone=True), held("b", 2)], "b"),  # banned or dead: gone
        ([held("a", 0, rest_until=NOW + 1), held("b", 1, proven=False)], None),  # nothing to use: wait
        ([held("a", 0, next_turn=0.05), held("b", 3)], "b"),  # its pace lets it send nothing now
        ([held("a", 2, next_turn=0.0), held("b", 3)], "a"),  # its turn has come
        ([held("a", 0, next_turn=0.1), held("b", 0, next_turn=0.01)], None),  # every one at its pace: wait
    ],
)
def test_a_request_goes_through(leases: list[HeldLease], chosen: str | None) -> None:
    found = choose(leases, NOW)
    assert (found.lease.proxy_id.split("/")[1] if found else None) == chosen


OPTIONS = BookOptions(requests_per_lease=2, max_leases_per_site=3)


@pytest.mark.parametrize(
    ("leases", "chosen_index", "sticky", "ask"),
    [
        ([], None, False, True),  # the site's first request
        ([held("a", 0)], 0, False, False),  # room on the lease it got
        ([held("a", 2)], 0, False, True),  # as busy as a lease should be: one more, ahead
        ([held("a", 2), held("b", 2), held("c", 2)], 0, False, False),  # at the site's cap: they share
        ([held("a", 2), held("b", 2), held("c", 2, gone=True)], 0, False, True),  # a gone lease does not count
        ([held("a", 5)], 0, True, False),  # a sticky session holds one lease
        ([], None, True, True),
    ],
)
def test_a_site_asks_for_another_lease(leases: list[HeldLease], chosen_index: int | None, sticky: bool, ask: bool) -> None:
    chosen = leases[chosen_index] if chosen_index is not None else None
    assert wants_another(leases, chosen, OPTIONS, sticky) is ask
