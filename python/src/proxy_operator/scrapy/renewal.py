"""When a held lease is renewed, released or left alone, and how often the book looks. Pure.

A renewal starts at the first tick that finds the lease within its ``lead`` of expiring, so
the latest it starts is ``lead - tick`` before the expiry: that much must be left for the call.
A third of the TTL with a one-second tick leaves nothing for TTLs of 3 s and less (a TTL of 3 s
was renewed as it expired; one of 1 s expired between two ticks). So the tick shrinks with the
TTL, and the lead covers one tick plus the call's allowance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["keep", "renew", "release"]

#: The book's tick (seconds) for ordinary TTLs.
TICK_SECONDS = 1.0
#: A tick is at most this share of the TTL.
TICK_SHARE = 1 / 6
#: Time left for the renewal call itself at the latest it starts: a second, at most a third of the TTL.
CALL_ALLOWANCE_SECONDS = 1.0


@dataclass(frozen=True)
class RenewalTiming:
    #: How often the book ticks (seconds).
    tick: float
    #: A lease in use is renewed once this little of its TTL is left (seconds).
    lead: float


def renewal_timing(ttl: float) -> RenewalTiming:
    """A third of the TTL, or more when a tick and the call's allowance need it (never more than
    the whole TTL less one tick)."""
    tick = min(TICK_SECONDS, ttl * TICK_SHARE)
    allowance = min(CALL_ALLOWANCE_SECONDS, ttl / 3)
    return RenewalTiming(tick, max(ttl / 3, tick + allowance))


def renewal_action(now: float, expires_at: float, ttl: float, used_since_renewal: bool) -> Action:
    """A lease within its lead of expiring is renewed when it carried a request since its last
    renewal, released otherwise (it is leased again when a request needs it)."""
    if expires_at - now > renewal_timing(ttl).lead:
        return "keep"
    return "renew" if used_since_renewal else "release"
