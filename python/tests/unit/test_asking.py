"""A site's ask for one more lease, as tables: when it may ask, which proxies it excludes, and what
the server's answer means (issue 48: another team's leases make "least used" a proxy the site
holds, so only a refusal of an ask excluding the held proxies says the site covers the fleet)."""

from __future__ import annotations

import pytest

from proxy_operator import DiscoveryApiError
from proxy_operator.scrapy.asking import (
    GrantVerdict,
    RefusalVerdict,
    after_grant,
    after_refusal,
    covered_for,
    may_ask,
    quota_covers,
    to_exclude,
)

NOW = 100.0


@pytest.mark.parametrize(
    ("asking", "live", "refused_until", "saturated_until", "ask"),
    [
        (False, 0, 0.0, 0.0, True),  # the site's first ask
        (True, 1, 0.0, 0.0, False),  # one ask at a time
        (False, 1, NOW + 1, 0.0, False),  # a refusal waited out (1 s, or all_cooling_down's Retry-After)
        (False, 0, NOW + 1, 0.0, False),  # even with nothing held
        (False, 1, NOW, 0.0, True),  # its wait is over
        (False, 3, 0.0, NOW + 30, False),  # covered: the site's leases share its requests
        (False, 3, 0.0, NOW, True),  # covered no longer
        (False, 0, 0.0, NOW + 30, True),  # covered, but every lease is gone: they cover nothing
    ],
)
def test_a_site_may_ask(asking: bool, live: int, refused_until: float, saturated_until: float, ask: bool) -> None:
    assert may_ask(asking=asking, live=live, now=NOW, refused_until=refused_until, saturated_until=saturated_until) is ask


MANY = [f"ns/p{i}" for i in range(150)]


@pytest.mark.parametrize(
    ("held", "session", "supported", "excluded"),
    [
        ([], None, True, []),  # nothing held: a plain ask (any operator takes it)
        (["ns/a"], None, True, ["ns/a"]),  # the held proxy: a grant is always a new one
        (["ns/a", "ns/b", "ns/a"], None, True, ["ns/a", "ns/b"]),  # each once (two sessions' leases on one proxy)
        (MANY, None, True, MANY[:100]),  # at most the API's 100: a site with more has plenty
        (["ns/a"], "job-1", True, []),  # a sticky session keeps its proxy: the server refuses exclude with it
        (["ns/a"], None, False, []),  # an operator older than exclude: asked as before
    ],
)
def test_an_ask_excludes(held: list[str], session: str | None, supported: bool, excluded: list[str]) -> None:
    assert to_exclude(held, session=session, supported=supported) == excluded


@pytest.mark.parametrize(
    ("granted", "held", "closed", "verdict"),
    [
        ("ns/c", ["ns/a", "ns/b"], False, "keep"),  # a proxy new to the site: one more to spread over
        ("ns/a", [], False, "keep"),  # the site's first
        # A proxy the site holds: only an ask that could not exclude it (an older operator, more
        # than 100 held) gets one; the server had nothing better, so it is given back and the
        # site stops asking for a while.
        ("ns/a", ["ns/a", "ns/b"], False, "covered"),
        ("ns/c", ["ns/a"], True, "release"),  # the crawl is closing
    ],
)
def test_a_grant_means(granted: str, held: list[str], closed: bool, verdict: GrantVerdict) -> None:
    assert after_grant(granted, held, closed=closed) == verdict


@pytest.mark.parametrize(
    ("dead_since", "asked_at", "verdict"),
    [
        (None, NOW, "keep"),  # never reported
        # Reported unreachable while the ask was in flight (the report not yet answered, or
        # answered after the ask left): the server granted it before it heard; given back. A
        # full run once got a second lease on a dead proxy this way, and a request through it.
        (float("inf"), NOW, "stale"),
        (NOW + 0.2, NOW, "stale"),
        # The ask left after the server took the report: its grant is the server's fresh word
        # (a probe passed since), kept.
        (NOW - 5.0, NOW, "keep"),
    ],
)
def test_a_grant_of_a_proxy_reported_dead_meanwhile_goes_back(
    dead_since: float | None, asked_at: float, verdict: GrantVerdict
) -> None:
    assert after_grant("ns/c", ["ns/a"], closed=False, dead_since=dead_since, asked_at=asked_at) == verdict


@pytest.mark.parametrize(
    ("code", "excluded", "verdict"),
    [
        # Excluding the held proxies: no other proxy is free for the site. Before issue 48's fix
        # the book asked without excluding and stopped only on a grant of a held proxy, which
        # another team's leases made the least used one.
        ("all_busy", ["ns/a"], "covered"),
        ("all_cooling_down", ["ns/a", "ns/b"], "covered"),
        # Excluding nothing: the server has nothing for the site; wait and ask again.
        ("all_busy", [], "refused"),
        ("all_cooling_down", [], "refused"),
        # The selector matches no proxy: the server's word whatever was excluded.
        ("no_match", [], "refused"),
        ("no_match", ["ns/a"], "refused"),
    ],
)
def test_a_refusal_means(code: str, excluded: list[str], verdict: RefusalVerdict) -> None:
    assert after_refusal(code, excluded) == verdict


@pytest.mark.parametrize(
    ("code", "retry_after", "seconds"),
    [
        ("all_busy", None, 30.0),  # every other proxy full: the book's saturated_seconds
        ("all_busy", 5.0, 30.0),
        ("all_cooling_down", 3.0, 3.0),  # the others rest for the site: until the first is back
        ("all_cooling_down", 600.0, 30.0),  # a long ban: asked again after saturated_seconds anyway
        ("all_cooling_down", None, 30.0),
    ],
)
def test_covered_for(code: str, retry_after: float | None, seconds: float) -> None:
    assert covered_for(code, retry_after, 30.0) == seconds


@pytest.mark.parametrize(
    ("err", "live", "covers"),
    [
        (DiscoveryApiError(429, "lease_quota", "token 'crawler' holds 3 live leases"), 1, True),
        # Nothing held: the site has nothing to share; waited out (after_failure: retry).
        (DiscoveryApiError(429, "lease_quota", "token 'crawler' holds 3 live leases"), 0, False),
        # The token over its rate limit: a failure to wait out, whatever the site holds.
        (DiscoveryApiError(429, "too_many_requests", "slow down"), 1, False),
        (DiscoveryApiError(503, "store_unavailable", "redis"), 1, False),
        (ConnectionError("refused"), 1, False),
    ],
)
def test_the_tokens_lease_quota_means_the_sites_leases_are_all_it_gets(err: BaseException, live: int, covers: bool) -> None:
    assert quota_covers(err, live) is covers
