"""The API the fleet tests run against (test/python/pytest.unit.test.ts starts it): four healthy
proxies, ``fleet/p0`` … ``fleet/p3``, and two named tokens, one per team."""

from __future__ import annotations

from dataclasses import dataclass

PROXIES = [f"fleet/p{i}" for i in range(4)]


@dataclass(frozen=True)
class Fleet:
    #: The discovery API (DISCOVERY_URL).
    url: str
    #: Team A's token, the crawl's (DISCOVERY_TOKEN).
    token: str
    #: Team B's token: another team's load in the same book (DISCOVERY_TOKEN_OTHER).
    other_token: str
    #: The same API behind a front that answers ``exclude`` as an operator older than it does:
    #: 400 "unknown field(s) 'exclude'" (DISCOVERY_URL_PREDATING).
    predating_url: str
