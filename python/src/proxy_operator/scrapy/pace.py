"""The pace one proxy keeps for one site, learned from the site's 429s: a rate per second,
evenly spaced, that each request reserves a turn of. Pure: the caller passes the clock
(seconds); the LeaseBook keeps one per held lease and replaces it on every change.

The same rules as the gateway's pace (``gateway/site-pace.ts``, whose comments say why each
rule is as it is; decision 0042: a change there is made here too, with the same table rows);
the sites a Scrapy crawl meets are the same. Why evenly spaced: after a
429's rest, sending everything that waited at once gets most of it a 429 again, and a token
bucket's burst after a quiet spell meets a sliding window; turns spaced at a rate the site
allows pass a token bucket, a sliding and a fixed window alike, so the pace assumes nothing
about the limit's shape (``python/tests/unit/test_pace_convergence.py``'s table).

How the rate is learned (additive increase, multiplicative decrease, with a ceiling):

- The first 429 measures what the site let through in the last period (the 429's
  Retry-After, or ``BLIND_REST`` without one): that is the ``ceiling``, the rate a decrease
  of it (``BLIND_DECREASE`` without Retry-After, ``GENTLE_DECREASE`` with).
- While requests wait for a turn (demand exceeds the pace), the rate climbs once a period by
  half the gap to the ceiling: a 429 on a loose limit costs a moment at part rate.
- At the ceiling, after ``probe_after_periods`` quiet periods, the rate probes a step above
  it. A probe that held two periods becomes the ceiling (the limit rose) and the next probe's
  step doubles, up to doubling the rate; a refused probe goes back below the ceiling, and
  refused in a row (a limit that holds) each doubles the quiet before the next.
- A 429 at the ceiling lowers the ceiling a step; one below it makes that rate the ceiling.

With Retry-After the proxy rests exactly that long (the site said its period); without, a
moment (``BLIND_REST``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

#: A 429 without Retry-After rests the proxy for the site this long (seconds): one assumed period.
BLIND_REST = 1.0
#: A blind 429 below the ceiling cuts the rate to this share of the rate it met.
BLIND_DECREASE = 0.7
#: A 429 with Retry-After, at the ceiling, or refusing a probe: the rate falls to this share of the ceiling.
GENTLE_DECREASE = 0.9
#: A probe goes at least this share above the ceiling; a 429 at the ceiling lowers it by as much.
CEILING_STEP = 0.05
#: A probe that held multiplies the next probe's step by this, up to MAX_PROBE_STEP (doubling).
PROBE_STEP_GROWTH = 2.0
MAX_PROBE_STEP = 1.0
#: The rate climbs at least this share of the ceiling a period.
MIN_CLIMB = 0.02
#: No pace is slower than this (requests per second).
MIN_RATE = 0.2
#: Quiet periods at the ceiling before a probe; a refused probe doubles them up to the maximum.
PROBE_AFTER_PERIODS = 5
MAX_PROBE_AFTER_PERIODS = 80
#: Success times remembered to measure the rate a 429 met.
RECENT_CAP = 64
#: Before a 429 the period is unknown: successes are kept this long (seconds).
RECENT_KEEP = 60.0
#: The least span (seconds) a rate is measured over: a burst's successes in a few ms are no rate.
MIN_SPAN = 1.0

_EPSILON = 1e-9


@dataclass(frozen=True)
class Pace:
    #: Requests per second; None until the first 429 (an unpaced request goes at once).
    rate: float | None = None
    #: The rate a 429 last met (the limit is near it).
    ceiling: float = 0.0
    #: The last 429's Retry-After (at least a second), or BLIND_REST without one.
    period: float = BLIND_REST
    #: Whether the last 429 said no Retry-After.
    blind: bool = True
    #: The earliest the next turn may be: the last reserved turn plus one interval.
    due: float = 0.0
    #: No turn before this: the last 429's rest.
    rest_until: float = 0.0
    #: When the last 429 that taught the pace came: a request sent before it teaches nothing.
    limited_at: float = float("-inf")
    #: When the rate last climbed, and when it last probed above the ceiling.
    raised_at: float = float("-inf")
    probed_at: float = float("-inf")
    probe_after_periods: int = PROBE_AFTER_PERIODS
    #: The next probe's share above the ceiling: CEILING_STEP, doubled by each probe that held.
    probe_step: float = CEILING_STEP
    #: The rate the last 429 met (infinite once a probe passed it): no probe goes past halfway.
    refused: float = float("inf")
    #: After a first 429: the successes that measured its ceiling, counting those answered
    #: after it to requests sent before it (None otherwise).
    shown: int | None = None
    #: Times of the latest successes, oldest first.
    recent: tuple[float, ...] = ()


UNPACED = Pace()


class Turn(NamedTuple):
    """A request's turn: when it may go (``at`` >= now), and the pace once it is reserved."""

    at: float
    pace: Pace


class RateLimited(NamedTuple):
    pace: Pace
    #: False when the request went before the last 429 taught the pace (it says nothing new).
    teaches: bool
    #: How long the proxy rests for the site from now.
    rest: float


def wait(pace: Pace, now: float) -> float:
    """Seconds until the next turn (0: a request may go now). Changes nothing."""
    if pace.rate is None:
        return 0.0
    return max(0.0, pace.rest_until - now, pace.due - now)


def reserve(pace: Pace, now: float) -> Turn:
    """The next turn at ``now``: at once when unpaced, else after the rest and one interval
    after the last reserved turn. A turn that must wait says demand exceeds the pace: the rate
    may climb (or probe) first. The caller keeps ``pace`` only when it takes the turn."""
    if pace.rate is None:
        return Turn(now, pace)
    at = max(now, pace.rest_until, pace.due)
    if at == now:
        return Turn(at, replace(pace, due=at + 1.0 / pace.rate))
    nxt = climbed(pace, now)
    # A probe counts from its own turn, the first at its rate (the turns before keep the old spacing).
    if nxt.probed_at == now and pace.probed_at != now:
        nxt = replace(nxt, probed_at=at)
    assert nxt.rate is not None
    return Turn(at, replace(nxt, due=at + 1.0 / nxt.rate))


def waiting(pace: Pace, now: float) -> Pace:
    """A request waits for this pace's turn (demand exceeds it): the pace after it may have
    climbed or probed, with no turn reserved. For a caller that polls for a turn instead of
    reserving one ahead (the LeaseBook: a request takes whichever lease has a turn first)."""
    if pace.rate is None or wait(pace, now) == 0:
        return pace
    return climbed(pace, now)


def climbed(pace: Pace, now: float) -> Pace:
    """Demand exceeds the pace: a probe that held becomes the ceiling; the rate climbs, or probes."""
    p = pace
    assert p.rate is not None
    rate = p.rate
    held = False
    if rate > p.ceiling and now - p.probed_at >= 2 * p.period:
        held = True
        p = replace(
            p,
            ceiling=rate,
            refused=float("inf") if rate >= p.refused * (1 - _EPSILON) else p.refused,
            probe_after_periods=max(PROBE_AFTER_PERIODS, p.probe_after_periods // 2),
            probe_step=min(MAX_PROBE_STEP, max(p.probe_step, _base_step(p)) * PROBE_STEP_GROWTH),
        )
    if now - max(p.limited_at, p.raised_at) < p.period:
        return p
    if rate < p.ceiling:
        step = max((p.ceiling - rate) / 2, p.ceiling * MIN_CLIMB)
        return replace(p, rate=min(p.ceiling, rate + step), raised_at=now)
    quiet = p.probe_after_periods * p.period
    if held or (now - p.limited_at >= quiet and now - p.probed_at >= quiet):
        return replace(p, rate=_probe_rate(p), probed_at=now, raised_at=now)
    return p


def _probe_rate(p: Pace) -> float:
    """The step above the ceiling, no further than halfway to the rate last refused, at least
    the base step."""
    halfway = (p.ceiling + p.refused) / 2
    base = p.ceiling * (1 + _base_step(p))
    return max(base, min(p.ceiling * (1 + max(p.probe_step, _base_step(p))), halfway))


def _base_step(p: Pace) -> float:
    """CEILING_STEP, and at least one more request a period (5 % of 3/s is one in 7 s)."""
    return max(CEILING_STEP, 1.0 / p.period / p.ceiling) if p.ceiling > 0 else CEILING_STEP


def succeeded(pace: Pace, now: float, sent_at: float | None = None) -> Pace:
    """The site answered a request sent at ``sent_at`` with something other than a 429. One
    sent within a period before the first 429 and answered after it was allowed in the period
    the 429 measured: the ceiling and the rate rise to count it."""
    sent = now if sent_at is None else sent_at
    if pace.shown is not None and pace.limited_at - pace.period < sent < pace.limited_at:
        shown = pace.shown + 1
        ceiling = max(pace.ceiling, shown / pace.period)
        decrease = BLIND_DECREASE if pace.blind else GENTLE_DECREASE
        assert pace.rate is not None
        return replace(pace, shown=shown, ceiling=ceiling, rate=max(pace.rate, ceiling * decrease))
    keep_after = now - (RECENT_KEEP if pace.rate is None else 2 * pace.period)
    recent = [t for t in pace.recent[-(RECENT_CAP - 1):] if t > keep_after]
    recent.append(now)
    return replace(pace, recent=tuple(recent))


def rate_limited(pace: Pace, now: float, sent_at: float, retry_after: float | None) -> RateLimited:
    """The site answered a request sent at ``sent_at`` with a 429 at ``now`` (``retry_after``:
    its Retry-After in seconds, None without one)."""
    if sent_at < pace.limited_at:
        return RateLimited(pace, False, max(0.0, pace.rest_until - now))
    blind = retry_after is None
    rest = BLIND_REST if retry_after is None else max(0.0, retry_after)
    period = BLIND_REST if retry_after is None else max(1.0, retry_after)
    allowed = sum(1 for t in pace.recent if t > now - period)
    measured = measured_rate(pace.recent, now, period)
    probe_refused = (
        pace.rate is not None and pace.rate > pace.ceiling and now - pace.probed_at < 2 * pace.period
    )
    at_ceiling = pace.rate is not None and pace.rate >= pace.ceiling * (1 - _EPSILON)
    probe_after_periods = PROBE_AFTER_PERIODS
    if probe_refused:
        ceiling = pace.ceiling
        rate = ceiling * GENTLE_DECREASE
        # After probes that held the limit rose: the base quiet. Refused in a row: doubled.
        probe_after_periods = (
            PROBE_AFTER_PERIODS
            if pace.probe_step > CEILING_STEP
            else min(MAX_PROBE_AFTER_PERIODS, pace.probe_after_periods * 2)
        )
    elif at_ceiling:
        ceiling = pace.ceiling * (1 - CEILING_STEP)
        rate = ceiling * GENTLE_DECREASE
    else:
        # The first 429 meets what went through; a later one below the ceiling meets the rate.
        ceiling = measured if pace.rate is None else pace.rate
        rate = ceiling * (BLIND_DECREASE if blind else GENTLE_DECREASE)
    ceiling = max(MIN_RATE, ceiling)
    learned = Pace(
        rate=max(MIN_RATE, rate),
        ceiling=ceiling,
        period=period,
        blind=blind,
        due=now + rest,
        rest_until=now + rest,
        limited_at=now,
        raised_at=now,
        probed_at=pace.probed_at,
        probe_after_periods=probe_after_periods,
        probe_step=CEILING_STEP,
        refused=measured if pace.rate is None else pace.rate,
        shown=allowed if pace.rate is None else None,
    )
    return RateLimited(learned, True, rest)


def measured_rate(recent: tuple[float, ...], now: float, period: float) -> float:
    """The rate that went through before a first 429, per second: the successes of the last
    period, or of the last 2 or 4 when the remembered ones cover them (a steady stream sent in
    bursts shows its rate over a longer window). When the remembered successes (RECENT_CAP)
    span less than the period, their own span: 64 of a crawl's 150/s counted over a 7 s
    Retry-After read as 9/s (a 10 s fixed window's Retry-After: 0.41 of its rate)."""
    best = 1.0 / period
    if len(recent) >= RECENT_CAP and recent[0] > now - period:
        best = max(best, len(recent) / max(now - recent[0], MIN_SPAN))
    for periods in (1, 2, 4):
        since = now - periods * period
        if periods > 1 and (not recent or recent[0] > since):
            break
        count = sum(1 for t in recent if t > since)
        best = max(best, count / (periods * period))
    return best


def adopt(mine: Pace, learned: Pace, now: float) -> Pace:
    """A proxy's first pace for a site another proxy has learned: sites limit each source alike,
    so it starts at that rate and ceiling instead of learning them by a 429 of its own. It
    starts with the base quiet and step (the learned quiet may be minutes old). A proxy with a
    pace keeps it."""
    if mine.rate is not None or learned.rate is None:
        return mine
    return Pace(
        rate=learned.rate,
        ceiling=learned.ceiling,
        period=learned.period,
        blind=learned.blind,
        due=now,
        limited_at=now,
        raised_at=now,
        probed_at=learned.probed_at,
        refused=learned.refused,
        recent=mine.recent,
    )
