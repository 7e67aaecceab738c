"""The pace a proxy keeps for a site after a 429, as a table."""

from __future__ import annotations

import pytest

from proxy_operator.scrapy.pace import PROBE_AFTER_WINDOWS, Pace, SlotTiming, resting


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


@pytest.mark.parametrize(
    ("second_429_at", "successes_between", "allowed"),
    [
        # 0.3 s after a 1 s rest: 3 pages in the window say nothing about a pace of 8
        (12.3, [12.1, 12.2, 12.25], 8),
        # a whole window after the rest: its count is the pace, lower or not
        (13.5, [12.6, 12.8, 13.0, 13.2], 4),
        # a rest-shortened window that counted more: the higher count
        (12.5, [12.0 + i * 0.04 for i in range(12)], 12),
    ],
)
def test_a_429_soon_after_a_rest_keeps_the_pace_learned(
    second_429_at: float, successes_between: list[float], allowed: int
) -> None:
    pace = paced([10.2 + i * 0.1 for i in range(8)])
    pace.on_rate_limited(11.0, 1.0)  # 8 per second; rests until 12.0
    assert pace.allowed == 8
    for at in successes_between:
        pace.on_success(at)
    pace.on_rate_limited(second_429_at, 1.0)
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
    ("retry_after", "rest"),
    [
        (1.0, SlotTiming(1.0, 0.0)),  # exactly the Retry-After, whatever the slot's jitter
        (4.0, SlotTiming(4.0, 0.0)),
        (0.0, SlotTiming(0.0, 0.0)),
        (-1.0, SlotTiming(0.0, 0.0)),  # never a negative delay
    ],
)
def test_a_rest_is_the_retry_after_exactly(retry_after: float, rest: SlotTiming) -> None:
    # Scrapy spreads a slot's delay over delay * (1 ± jitter): a rest without jitter ends on time,
    # neither before the site allows (a 429 more) nor seconds after (a proxy idle).
    assert resting(retry_after) == rest


def limited(allowed: int, at: float = 0.0, window: float = 1.0) -> Pace:
    """A pace of ``allowed`` per ``window`` set by a 429 at ``at``."""
    pace = paced([at - window / 2] * allowed)
    pace.on_rate_limited(at, window)
    return pace


def sends(pace: Pace, start: float, end: float, step: float = 0.001) -> list[float]:
    """When a proxy with requests waiting sends, looking every ``step`` s from start to end."""
    times, now = [], start
    while now < end:
        while pace.wait(now) == 0:
            pace.take(now)
            times.append(now)
        now = round(now + step, 6)
    return times


@pytest.mark.parametrize(
    ("allowed", "rest", "span", "expected"),
    [
        # 4 per second, the bucket empty at the 429 and full (one request deep) by the end of a
        # 1 s rest: one at once, then one each 0.25 s (2 s later: 1 + 8)
        (4, 1.0, 2.0, 9),
        # a longer rest fills it no deeper: the same
        (4, 5.0, 2.0, 9),
        # 25 per second for 3 s after a 1 s rest: a quarter window at once (6), then 75
        (25, 1.0, 3.0, 81),
    ],
)
def test_a_pace_is_a_bucket_of_one_window(allowed: int, rest: float, span: float, expected: int) -> None:
    pace = limited(allowed, at=10.0)
    # During the rest the book gives the proxy nothing (rest_until); after it, the bucket allows:
    times = sends(pace, 10.0 + rest, 10.0 + rest + span)
    assert abs(len(times) - expected) <= 1
    # never more than 1.25 windows' worth in any window
    for i, t in enumerate(times):
        assert sum(1 for u in times[i:] if u < t + 1.0) <= allowed * 1.25 + 1


def test_a_late_caller_is_made_up_for() -> None:
    # An event loop that looks only every 60 ms still gets 25 requests a second out of a pace of
    # 25: the bucket refills by the clock (a slot delay counted from the last send gave 16).
    pace = limited(25, at=0.0)
    times = sends(pace, 1.0, 5.0, step=0.06)
    assert len(times) >= 4 * 25 - 1


def test_without_a_pace_a_proxy_never_waits() -> None:
    pace = Pace()
    assert all(pace.wait(t) == 0 for t in (0.0, 0.001, 5.0))
    pace.take(1.0)
    assert pace.wait(1.0) == 0


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
    assert me.adopt(other, 5.0) is adopted
    assert me.delay() == pytest.approx(delay)


def test_scrapys_own_slot_rests_exactly_then_keeps_its_jitter() -> None:
    from scrapy.core.downloader import Slot

    from proxy_operator.scrapy.middleware import _apply, _jitter

    slot = Slot(concurrency=8, delay=0.2, jitter=0.5)
    base = SlotTiming(slot.delay, _jitter(slot))
    _apply(slot, resting(1.0))
    assert {slot.download_delay() for _ in range(50)} == {1.0}
    _apply(slot, base)
    waits = [slot.download_delay() for _ in range(200)]
    assert 0.1 <= min(waits) < max(waits) <= 0.3
