"""The pace a proxy keeps for a site after a 429 (pace.py), its rules as tables."""

from __future__ import annotations

from dataclasses import replace
from functools import reduce

import pytest

from proxy_operator.scrapy.pace import (
    BLIND_REST,
    RECENT_CAP,
    UNPACED,
    Pace,
    adopt,
    measured_rate,
    rate_limited,
    reserve,
    succeeded,
    wait,
    waiting,
)

T = 1000.0


def paced(**fields: object) -> Pace:
    """A pace of 3 a second at its ceiling, its 429 ten seconds ago."""
    return replace(Pace(rate=3.0, ceiling=3.0, limited_at=T - 10, probed_at=0.0), **fields)  # type: ignore[arg-type]


def with_successes(pace: Pace, times: list[float]) -> Pace:
    return reduce(lambda p, t: succeeded(p, t), times, pace)


@pytest.mark.parametrize(
    ("pace", "at"),
    [
        (UNPACED, T),  # no 429 yet: at once
        (paced(due=T - 5), T),  # nothing reserved lately: at once
        (paced(rest_until=T + 0.8, due=T + 0.8), T + 0.8),  # resting after a 429: when the rest ends
        (paced(due=T + 0.2), T + 0.2),  # a turn reserved before: one interval after it
    ],
)
def test_a_turn_comes_after_the_rest_and_one_interval_after_the_last(pace: Pace, at: float) -> None:
    assert reserve(pace, T).at == at
    assert wait(pace, T) == pytest.approx(at - T)


def test_turns_are_spaced_one_interval_apart_never_a_burst() -> None:
    pace = paced(rate=4.0, ceiling=4.0, limited_at=T, raised_at=T, due=T)
    assert wait(pace, T) == 0
    pace = reserve(pace, T).pace
    # The next request waits its interval: a bucket's burst after a quiet spell meets a sliding window.
    assert wait(pace, T) == pytest.approx(0.25)
    assert wait(pace, T + 0.25) == 0


@pytest.mark.parametrize(
    ("fields", "rate", "ceiling"),
    [
        # below the ceiling, a period after the 429: half the gap
        ({"rate": 2.0, "ceiling": 4.0, "limited_at": T - 1}, 3.0, 4.0),
        # within a period of the 429, or of the last climb: not yet
        ({"rate": 2.0, "ceiling": 4.0, "limited_at": T - 0.5}, 2.0, 4.0),
        ({"rate": 2.0, "ceiling": 4.0, "raised_at": T - 0.5}, 2.0, 4.0),
        # near the ceiling: at least 2 % of it, never past it
        ({"rate": 3.99, "ceiling": 4.0}, 4.0, 4.0),
        # at the ceiling, quiet for 5 periods: probes one request a period above it (5 % at least)
        ({"rate": 4.0, "ceiling": 4.0, "limited_at": T - 5}, 5.0, 4.0),
        # at the ceiling, a 429 4 s ago: holds
        ({"rate": 4.0, "ceiling": 4.0, "limited_at": T - 4}, 4.0, 4.0),
        # a probe that held 2 periods becomes the ceiling
        ({"rate": 4.2, "ceiling": 4.0, "probed_at": T - 2, "raised_at": T - 0.5}, 4.2, 4.2),
    ],
)
def test_the_rate_climbs_while_requests_wait(fields: dict[str, float], rate: float, ceiling: float) -> None:
    after = waiting(paced(due=T + 0.5, **fields), T)
    assert after.rate == pytest.approx(rate)
    assert after.ceiling == pytest.approx(ceiling)


def test_the_rate_does_not_climb_when_a_turn_is_free() -> None:
    pace = paced(rate=2.0, ceiling=4.0, due=0.0)
    assert waiting(pace, T) is pace
    assert reserve(pace, T).pace.rate == 2.0


FIVE_LAST_SECOND = with_successes(UNPACED, [T - 0.9, T - 0.7, T - 0.5, T - 0.3, T - 0.1])


@pytest.mark.parametrize(
    ("before", "retry_after", "want", "rest"),
    [
        # first, no Retry-After: the ceiling is what went through in a second, the rate 70 % of it
        (FIVE_LAST_SECOND, None, {"ceiling": 5.0, "rate": 3.5, "rest_until": T + 1, "blind": True}, BLIND_REST),
        # first, Retry-After 2 s: the site's period, rested exactly; 90 % of the rate
        (
            with_successes(UNPACED, [T - 1.9, T - 1.5, T - 1.1, T - 0.7, T - 0.3, T - 0.1]),
            2.0,
            {"ceiling": 3.0, "rate": 2.7, "rest_until": T + 2, "period": 2.0, "blind": False},
            2.0,
        ),
        # Retry-After 0: no rest, measured over a second
        (FIVE_LAST_SECOND, 0.0, {"ceiling": 5.0, "rate": 4.5, "rest_until": T}, 0.0),
        # at the ceiling: the ceiling falls 5 %, the rate to 90 % of it
        (paced(rate=4.0, ceiling=4.0), None, {"ceiling": 3.8, "rate": 3.42}, BLIND_REST),
        # below the ceiling: that rate is the new ceiling (a pace never stays above a limit)
        (paced(rate=3.0, ceiling=4.0), None, {"ceiling": 3.0, "rate": 2.1}, BLIND_REST),
        # a probe refused: back under the ceiling, the quiet before the next doubles
        (
            paced(rate=4.2, ceiling=4.0, probed_at=T - 0.5, probe_after_periods=5),
            None,
            {"ceiling": 4.0, "rate": 3.6, "probe_after_periods": 10},
            BLIND_REST,
        ),
    ],
)
def test_what_a_429_teaches(before: Pace, retry_after: float | None, want: dict[str, object], rest: float) -> None:
    answer = rate_limited(before, T, T - 0.05, retry_after)
    assert answer.teaches
    assert answer.rest == rest
    for name, value in want.items():
        got = getattr(answer.pace, name)
        assert (name, got) == (name, pytest.approx(value) if isinstance(value, float) else value)


def test_a_429_to_a_request_sent_before_the_last_429_teaches_nothing() -> None:
    pace = paced(limited_at=T - 0.1, rest_until=T + 0.9)
    assert rate_limited(pace, T, T - 0.2, None) == (pace, False, pytest.approx(0.9))


def test_a_429_soon_after_a_rest_lowers_the_pace() -> None:
    # The old pace kept what it had learned when a 429 came within a window of its rest, so a
    # limit longer than the assumed second (a 10 s fixed window) was met every second for good.
    pace = rate_limited(FIVE_LAST_SECOND, T, T - 0.05, None).pace
    for _ in range(4):
        before = pace.rate
        assert before is not None
        now = pace.rest_until + 0.1
        pace = rate_limited(pace, now, now - 0.05, None).pace
        assert pace.rate is not None and pace.rate < before


@pytest.mark.parametrize(
    ("recent", "period", "rate"),
    [
        ((), 1.0, 1.0),  # nothing went through: one a period
        ((T - 0.9, T - 0.5, T - 0.1), 1.0, 3.0),
        # a stream in bursts: its rate over the last 4 periods
        ((T - 3.9, T - 3.8, T - 3.7, T - 3.6, T - 1.9, T - 1.8, T - 1.7, T - 1.6), 1.0, 2.0),
        # the remembered successes (RECENT_CAP) span half a second of a 7 s Retry-After: their
        # own span, not 64 over 7 s (9/s where 128/s went through)
        (tuple(T - 0.5 + i * 0.5 / RECENT_CAP for i in range(RECENT_CAP)), 7.0, RECENT_CAP / 1.0),
    ],
)
def test_the_rate_a_first_429_met(recent: tuple[float, ...], period: float, rate: float) -> None:
    assert measured_rate(recent, T, period) == pytest.approx(rate)


def test_a_success_sent_before_the_first_429_and_answered_after_it_counts_to_its_ceiling() -> None:
    pace = rate_limited(FIVE_LAST_SECOND, T, T - 0.05, None).pace
    later = succeeded(pace, T + 0.02, T - 0.03)
    assert (later.shown, later.ceiling) == (6, pytest.approx(6.0))
    assert later.rate == pytest.approx(4.2)


def test_without_a_429_there_is_no_pace() -> None:
    pace = with_successes(UNPACED, [1.0, 2.0, 3.0])
    assert pace.rate is None
    assert all(wait(pace, t) == 0 for t in (3.0, 3.001))
    assert reserve(pace, 3.0).pace == pace


def test_another_proxy_adopts_a_learned_pace_one_with_its_own_keeps_it() -> None:
    learned = paced(rate=2.5, ceiling=3.0)
    adopted = adopt(UNPACED, learned, T)
    assert (adopted.rate, adopted.ceiling, adopted.due, adopted.rest_until) == (2.5, 3.0, T, 0.0)
    own = paced(rate=1.0)
    assert adopt(own, learned, T) is own
