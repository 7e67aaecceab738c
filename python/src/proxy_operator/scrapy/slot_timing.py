"""A Scrapy download slot's timing while its proxy rests out a 429."""

from __future__ import annotations

from dataclasses import dataclass


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
