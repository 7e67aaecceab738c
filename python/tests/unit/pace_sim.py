"""Simulated sites and one proxy's crawl of them on a virtual clock, for the pace's tables
(test_pace_convergence.py): each millisecond the crawler's demand joins a backlog (at most a
few seconds of it; what overflows is lost), a request goes when the proxy's pace has a turn,
travels 5-25 ms each way (seeded), and the site's answer teaches the pace."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from proxy_operator.scrapy import pace as paces

Shape = Literal["bucket", "sliding", "fixed"]


class Site(Protocol):
    def accept(self, t: float) -> bool: ...

    def wait(self, t: float) -> float:
        """Seconds until a request would pass (for Retry-After)."""
        ...


class TokenBucket:
    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity, self.tokens, self.at = rate, capacity, capacity, 0.0

    def _refill(self, t: float) -> None:
        self.tokens = min(self.capacity, self.tokens + (t - self.at) * self.rate)
        self.at = t

    def accept(self, t: float) -> bool:
        self._refill(t)
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def wait(self, t: float) -> float:
        self._refill(t)
        return max(0.0, (1 - self.tokens) / self.rate)


class SlidingWindow:
    def __init__(self, limit: int, window: float) -> None:
        self.limit, self.window, self.log = limit, window, deque[float]()

    def _trim(self, t: float) -> None:
        while self.log and self.log[0] <= t - self.window:
            self.log.popleft()

    def accept(self, t: float) -> bool:
        self._trim(t)
        if len(self.log) >= self.limit:
            return False
        self.log.append(t)
        return True

    def wait(self, t: float) -> float:
        self._trim(t)
        return 0.0 if len(self.log) < self.limit else self.log[0] + self.window - t


class FixedWindow:
    def __init__(self, limit: int, window: float) -> None:
        self.limit, self.window, self.current, self.count = limit, window, -1, 0

    def accept(self, t: float) -> bool:
        w = math.floor(t / self.window)
        if w != self.current:
            self.current, self.count = w, 0
        if self.count >= self.limit:
            return False
        self.count += 1
        return True

    def wait(self, t: float) -> float:
        return self.window - (t % self.window)


def site_of(shape: Shape, rate: int) -> Site:
    """A limit of ``rate`` a second: a bucket of a second's worth, a sliding window of a second,
    or a fixed window of ten seconds (whose Retry-After is the rest of the window)."""
    if shape == "bucket":
        return TokenBucket(rate, rate)
    if shape == "sliding":
        return SlidingWindow(rate, 1.0)
    return FixedWindow(rate * 10, 10.0)


@dataclass
class Run:
    ok: int = 0
    limited: int = 0
    demanded: float = 0.0


def crawl(site: Site, demand: Callable[[float], float], retry_after: bool, seconds: float) -> Run:
    """``seconds`` of one proxy's requests to ``site`` at ``demand(t)`` a second, as the
    LeaseBook sends them: a request takes a turn when the pace has one (``reserve``), and
    while it waits the pace may climb (``waiting``)."""
    rnd = random.Random(42)
    pace = paces.UNPACED
    rest_until = 0.0
    arrivals: dict[int, list[float]] = {}
    answers: dict[int, list[tuple[float, float | None]]] = {}
    backlog = 0.0
    run = Run()
    for ms in range(int(seconds * 1000)):
        t = ms / 1000
        for sent_at, refused in answers.pop(ms, []):
            if refused is None:
                run.ok += 1
                pace = paces.succeeded(pace, t, sent_at)
            else:
                run.limited += 1
                # Retry-After is whole seconds on the wire.
                after = float(max(1, math.ceil(refused))) if retry_after else None
                answer = paces.rate_limited(pace, t, sent_at, after)
                pace = answer.pace
                rest_until = max(rest_until, t + answer.rest)
        for sent_at in arrivals.pop(ms, []):
            refused = None if site.accept(t) else site.wait(t)
            answers.setdefault(ms + 5 + int(rnd.random() * 20), []).append((sent_at, refused))
        wanted = demand(t) / 1000
        run.demanded += wanted
        backlog = min(backlog + wanted, max(5.0, demand(t) * 3))
        while backlog >= 1:
            if rest_until > t or paces.wait(pace, t) > 0:
                pace = paces.waiting(pace, t)
                break
            pace = paces.reserve(pace, t).pace
            backlog -= 1
            arrivals.setdefault(ms + 5 + int(rnd.random() * 20), []).append(t)
    return run
