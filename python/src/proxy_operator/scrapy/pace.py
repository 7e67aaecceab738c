"""A proxy's pace for one site, learned from its 429s: the site allowed as many requests per
Retry-After as came back through the proxy within that window before the 429, so from then on
the proxy sends at that rate, and now and then probes one higher.

The pace is a token bucket, taken when a request is given the proxy (LeaseBook.acquire), not a
download-slot delay: Scrapy counts a slot's delay from the moment it sent the last request, so
every late timer on a busy event loop stretched the pace (measured: 15-22 requests/s at a pace
of 25), while a bucket refills by the clock and makes up for a late caller. Its depth, a quarter
of a window, bounds the burst: no window carries more than 1.25 times what the site allowed.
Pure: the caller passes the clock."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: Successes at a pace before it is probed one request higher, per request of the pace.
PROBE_AFTER_WINDOWS = 3
#: The bucket's depth, in windows: how far a late caller is made up for.
DEPTH_WINDOWS = 0.25


@dataclass
class Pace:
    #: When each recent success came back (seconds), for the count before a 429. Counted on the
    #: way back, not when a request is queued: what reached the site, not what waited in a slot.
    sent: deque[float] = field(default_factory=deque)
    #: Requests the site allows per ``window`` seconds (None: no limit seen).
    allowed: int | None = None
    window: float = 0.0
    #: Successes since the pace was last set.
    successes: int = 0
    #: The longest window remembered, seconds.
    horizon: float = 120.0
    #: Requests the proxy may send now at this pace (at most the depth), as of ``filled_at``.
    tokens: float = 0.0
    filled_at: float = 0.0
    #: When the last rest (a 429's Retry-After) ended.
    rested_until: float = float("-inf")

    def on_sent(self, now: float) -> None:
        self.sent.append(now)
        while self.sent and self.sent[0] < now - self.horizon:
            self.sent.popleft()

    def on_rate_limited(self, now: float, retry_after: float) -> float:
        """The pace after a 429 whose Retry-After is ``retry_after``: the successes within the
        window before it are what the site allows per window; at least one. Returns the mean
        delay between requests at that pace. The bucket is empty now and refills during the rest."""
        window = max(retry_after, 1.0)
        allowed = max(sum(1 for t in self.sent if now - window <= t <= now), 1)
        if self.allowed is not None and self.rested_until > now - window:
            # Part of the window was a rest: its count says less than the pace already learned.
            allowed = max(allowed, self.allowed)
        self.allowed, self.window, self.successes = allowed, window, 0
        self.tokens, self.filled_at = 0.0, now
        self.rested_until = now + max(retry_after, 0.0)
        return self.delay()

    def on_success(self, now: float) -> float | None:
        """A success at the pace: after enough of them, one more request per window (the new
        mean delay); None while the pace stays."""
        self.on_sent(now)
        if self.allowed is None:
            return None
        self.successes += 1
        if self.successes < PROBE_AFTER_WINDOWS * self.allowed:
            return None
        self._refill(now)
        self.allowed += 1
        self.successes = 0
        return self.delay()

    def adopt(self, other: Pace, now: float) -> bool:
        """Takes the pace another proxy of the site learned, when this one has none yet: the
        site's limit is per source, so each proxy is allowed as much. It starts from an empty
        bucket (it may have spent the site's allowance already). Whether it changed."""
        if self.allowed is not None or other.allowed is None:
            return False
        self.allowed, self.window, self.successes = other.allowed, other.window, 0
        self.tokens, self.filled_at = 0.0, now
        return True

    def wait(self, now: float) -> float:
        """Seconds until the proxy may send its next request at this pace (0: now). Changes nothing."""
        if self.allowed is None:
            return 0.0
        tokens = self._tokens_at(now)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) * self.delay()

    def take(self, now: float) -> None:
        """A request goes through the proxy: one token spent (nothing without a pace)."""
        if self.allowed is None:
            return
        self._refill(now)
        self.tokens -= 1.0

    def delay(self) -> float:
        """Mean seconds between two requests at this pace (0: no pace)."""
        if self.allowed is None:
            return 0.0
        return self.window / self.allowed

    def _tokens_at(self, now: float) -> float:
        if self.allowed is None or now <= self.filled_at:
            return self.tokens
        depth = max(1.0, self.allowed * DEPTH_WINDOWS)
        return min(depth, self.tokens + (now - self.filled_at) / self.delay())

    def _refill(self, now: float) -> None:
        if now > self.filled_at:
            self.tokens, self.filled_at = self._tokens_at(now), now


@dataclass(frozen=True)
class SlotTiming:
    """A download slot's ``delay`` and ``jitter`` (Scrapy spreads each wait over
    ``delay * (1 ± jitter)``)."""

    delay: float
    jitter: float


def resting(retry_after: float) -> SlotTiming:
    """The slot while it rests out a Retry-After: its next request exactly that long after the
    429, without jitter (with Scrapy's default ±50 % a 1 s rest would end anywhere from 0.5 s,
    too early, or, stretched so its shortest is 1 s, as late as 3 s: two seconds of a proxy lost)."""
    return SlotTiming(max(retry_after, 0.0), 0.0)
