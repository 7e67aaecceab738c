"""How a site's requests share its leases: which one a request goes through, and whether the
site asks for one more. Pure."""

from __future__ import annotations

from . import pace as paces
from .book_options import BookOptions
from .lease_state import HeldLease


def choose(leases: list[HeldLease], now: float) -> HeldLease | None:
    """The lease a request goes through: the least busy one that is not resting and whose pace
    lets it send now, an unproven one only while it carries nothing. Pure."""
    best: HeldLease | None = None
    for held in leases:
        if held.gone or held.rest_until > now or (not held.proven and held.in_flight > 0):
            continue
        if paces.wait(held.pace, now) > 0:
            continue
        if best is None or held.in_flight < best.in_flight:
            best = held
    return best


def wants_another(leases: list[HeldLease], chosen: HeldLease | None, options: BookOptions, sticky: bool) -> bool:
    """Whether the site asks for one more lease: nothing to use, or the chosen one is as busy as
    a lease should be, and the site is under its cap. Pure."""
    live = sum(1 for held in leases if not held.gone)
    cap = 1 if sticky else options.max_leases_per_site
    if live >= cap:
        return False
    return chosen is None or chosen.in_flight >= options.requests_per_lease

