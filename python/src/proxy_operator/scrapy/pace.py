"""A proxy's pace for one site, learned from its 429s: the site allowed as many requests per
Retry-After as came back through the proxy within that window before the 429, so from then on the proxy's download slot keeps
that pace (a delay of Retry-After / allowed between its requests), and now and then probes one
higher. Pure: the caller passes the clock."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: Successes at a pace before it is probed one request higher, per request of the pace.
PROBE_AFTER_WINDOWS = 3


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

    def on_sent(self, now: float) -> None:
        self.sent.append(now)
        while self.sent and self.sent[0] < now - self.horizon:
            self.sent.popleft()

    def on_rate_limited(self, now: float, retry_after: float) -> float:
        """The delay between requests after a 429 whose Retry-After is ``retry_after``: the
        successes within the window before it are what the site allows per window; at least one."""
        window = max(retry_after, 1.0)
        allowed = max(sum(1 for t in self.sent if now - window <= t <= now), 1)
        self.allowed, self.window, self.successes = allowed, window, 0
        return self.delay()

    def on_success(self, now: float) -> float | None:
        """A success at the pace: after enough of them, one more request per window (the new
        delay); None while the pace stays."""
        self.on_sent(now)
        if self.allowed is None:
            return None
        self.successes += 1
        if self.successes < PROBE_AFTER_WINDOWS * self.allowed:
            return None
        self.allowed += 1
        self.successes = 0
        return self.delay()

    def adopt(self, other: Pace) -> bool:
        """Takes the pace another proxy of the site learned, when this one has none yet: the
        site's limit is per source, so each proxy is allowed as much. Whether it changed."""
        if self.allowed is not None or other.allowed is None:
            return False
        self.allowed, self.window, self.successes = other.allowed, other.window, 0
        return True

    def delay(self) -> float:
        """Seconds between two requests at this pace (0: no pace)."""
        if self.allowed is None:
            return 0.0
        return self.window / self.allowed


def rest_delay(retry_after: float, jitter: float) -> float:
    """The slot delay that keeps its next request at least ``retry_after`` away, with Scrapy's
    ±``jitter`` randomisation of slot delays (0.5 by default)."""
    return retry_after / max(1.0 - jitter, 0.05)
