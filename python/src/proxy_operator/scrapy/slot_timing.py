"""A Scrapy download slot's clock while its proxy rests out a 429. Pure.

Scrapy sends a slot's next request once ``lastseen + delay`` (the delay jittered) has passed,
and looks at the clock only for a slot whose delay is above 0. The rest is put on ``lastseen``,
not on ``delay``: AutoThrottle rewrites a slot's delay on every response, so a rest made of the
delay was cut by each answer still in flight (a 200 during a 1 s rest made it 0.51 s), and
giving the slot its delay back at the rest's end overwrote AutoThrottle's. With ``lastseen`` at
the rest's end the slot sends nothing before it, whatever its delay and jitter become, and then
keeps its own spacing (DOWNLOAD_DELAY's, AutoThrottle's)."""

from __future__ import annotations

from dataclasses import dataclass

#: The delay a slot without one takes while it rests (Scrapy ignores ``lastseen`` at 0), and
#: gives back once the rest is over.
REST_DELAY = 0.001


@dataclass(frozen=True)
class SlotClock:
    """A download slot's ``lastseen`` (its last send, on ``time.monotonic``) and ``delay``."""

    lastseen: float
    delay: float


def resting(slot: SlotClock, now: float, seconds: float) -> SlotClock:
    """The slot resting ``seconds`` from ``now``: nothing sent before the rest's end (a longer
    rest already in force stands); its delay untouched unless it has none."""
    return SlotClock(max(slot.lastseen, now + max(seconds, 0.0)), slot.delay if slot.delay > 0 else REST_DELAY)


def rested(slot: SlotClock, now: float) -> float | None:
    """The delay the slot gets back once its rest is over: 0 when the rest gave it REST_DELAY
    and nothing has changed it since; None when there is nothing to give back (or not yet: a
    later 429 moved the rest's end, and ``slot.lastseen - now`` is left of it)."""
    if slot.lastseen > now or slot.delay != REST_DELAY:
        return None
    return 0.0
