"""The pace a proxy keeps for a site after a 429, as a table."""

from __future__ import annotations

import pytest

from proxy_operator.scrapy.pace import PROBE_AFTER_WINDOWS, Pace, rest_delay


def paced(successes_at: list[float]) -> Pace:
    pace = Pace()
    for at in successes_at:
        pace.on_success(at)
    return pace


@pytest.mark.parametrize(
    ("successes_at", "limited_at", "retry_after", "allowed", "delay"),
    [
        # five pages came back in the second before the 429: five per second, one every 0.2 s
        ([10.1, 10.3, 10.5, 10.7, 10.9], 11.0, 1.0, 5, 0.2),
        # older successes do not count: only the Retry-After window before the 429
        ([1.0, 2.0, 10.5, 10.9], 11.0, 1.0, 2, 0.5),
        # a 429 with nothing before it: one per window, at least
        ([], 11.0, 2.0, 1, 2.0),
        # a Retry-After of 0 still rests a second
        ([10.5], 11.0, 0.0, 1, 1.0),
        # a long window: 12 pages in 6 s
        ([5.0 + i * 0.5 for i in range(12)], 11.0, 6.0, 12, 0.5),
    ],
)
def test_a_429_sets_the_pace_to_what_the_site_allowed(
    successes_at: list[float], limited_at: float, retry_after: float, allowed: int, delay: float
) -> None:
    pace = paced(successes_at)
    assert pace.on_rate_limited(limited_at, retry_after) == pytest.approx(delay)
    assert pace.allowed == allowed


def test_without_a_429_there_is_no_pace() -> None:
    pace = paced([1.0, 2.0, 3.0])
    assert pace.delay() == 0.0
    assert pace.on_success(4.0) is None


def test_a_pace_probes_one_higher_after_enough_successes() -> None:
    pace = paced([10.5, 10.7])
    assert pace.on_rate_limited(11.0, 1.0) == pytest.approx(0.5)
    changes = [pace.on_success(12.0 + i) for i in range(PROBE_AFTER_WINDOWS * 2)]
    assert changes[:-1] == [None] * (PROBE_AFTER_WINDOWS * 2 - 1)
    assert changes[-1] == pytest.approx(1.0 / 3)
    assert pace.allowed == 3


@pytest.mark.parametrize(
    ("retry_after", "jitter", "delay"),
    [(1.0, 0.0, 1.0), (1.0, 0.5, 2.0), (4.0, 0.5, 8.0), (1.0, 1.0, 20.0)],
)
def test_a_rest_outlasts_scrapys_jitter(retry_after: float, jitter: float, delay: float) -> None:
    # Scrapy spreads a slot's delay over delay * (1 ± jitter): the shortest must still be the rest.
    assert rest_delay(retry_after, jitter) == pytest.approx(delay)
    assert rest_delay(retry_after, jitter) * (1 - jitter) >= retry_after - 1e-9 or jitter >= 0.95


@pytest.mark.parametrize(
    ("mine", "theirs", "adopted", "delay"),
    [
        (None, 4, True, 0.25),  # no pace yet: the site's limit is per source, take the other's
        (2, 4, False, 0.5),  # a pace of its own stays
        (None, None, False, 0.0),  # nothing learned anywhere: no pace
    ],
)
def test_a_proxy_adopts_the_pace_another_proxy_of_the_site_learned(
    mine: int | None, theirs: int | None, adopted: bool, delay: float
) -> None:
    me, other = Pace(allowed=mine, window=1.0), Pace(allowed=theirs, window=1.0)
    assert me.adopt(other) is adopted
    assert me.delay() == pytest.approx(delay)
