"""When a held lease is renewed, released or left alone. Pure."""

from __future__ import annotations

from typing import Literal

Action = Literal["keep", "renew", "release"]


def renewal_action(now: float, expires_at: float, ttl: float, used_since_renewal: bool) -> Action:
    """A lease with a third of its TTL or less left is renewed when it carried a request since
    its last renewal, released otherwise (it is leased again when a request needs it)."""
    if expires_at - now > ttl / 3:
        return "keep"
    return "renew" if used_since_renewal else "release"
