"""What the lease book holds: a site's leases, each lease's state, and the book's counts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..errors import NoLease
from ..types import Lease
from .asking import FailureVerdict
from .pace import UNPACED, Pace

SiteKey = tuple[str, "str | None"]


class LeaseFailed(Exception):
    """A request gets no lease because asking failed (not a 409 refusal: that is NoLease);
    ``verdict`` says whether only this site's requests fail or the whole crawl (asking.py)."""

    def __init__(self, verdict: FailureVerdict, reason: str) -> None:
        super().__init__(reason)
        self.verdict = verdict
        self.reason = reason


@dataclass(eq=False)
class HeldLease:
    lease: Lease
    key: SiteKey
    ttl: float
    expires_at: float
    in_flight: int = 0
    ok_pending: int = 0
    used_since_renewal: bool = False
    #: A page came back through it: until then it carries one request at a time, so a proxy
    #: the site has banned costs one 403, not one per request that joined it meanwhile.
    proven: bool = False
    rest_until: float = 0.0
    gone: bool = False
    renewing: bool = False
    #: The site's pace through this proxy, learned from its 429s (pace.py).
    pace: Pace = UNPACED
    #: The earliest its next request may leave, at send time (send_turn.py).
    next_send: float = 0.0

    @property
    def host(self) -> str:
        return self.key[0]

    @property
    def proxy_id(self) -> str:
        return self.lease.proxy_id


@dataclass(eq=False)
class Site:
    key: SiteKey
    leases: list[HeldLease] = field(default_factory=list)
    asking: bool = False
    refused_until: float = 0.0
    saturated_until: float = 0.0
    last_refusal: NoLease | None = None
    #: Why the last ask failed, when it is to be asked again (the cause a dropped request gets).
    last_error: str | None = None
    #: Why the API refused this site's requests themselves (a 400 naming their session or target).
    rejected: str | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

@dataclass
class BookStats:
    leased: int = 0
    renewed: int = 0
    released: int = 0
    reported_ok: int = 0
    reported_banned: int = 0
    reported_rate_limited: int = 0
    reported_unreachable: int = 0
    refused: int = 0
    #: Ban and unreachable reports the server never took (counted at close: leases.py).
    unheard_banned: int = 0
    unheard_unreachable: int = 0

