"""When a request given a lease may leave: the pace held at send time too. Pure.

The book gives a lease's requests their turns at the pace when it gives them the lease
(leases.py), but a request then waits in its download slot, and the slot sends what waited at
its own spacing: behind AutoThrottle's delay (1 s at its start) a lease paced at 4/s gathered
requests that went 0.06 s apart once AutoThrottle lowered its delay, four times the site's pace
(``python/tests/unit/test_autothrottle.py``). So the add-on's download handler (send_check.py)
holds each request to the lease's turns as it sends it: never closer than the pace's interval
to the lease's last one, never within a rest. An unpaced lease (no 429 yet) holds nothing."""

from __future__ import annotations

from typing import NamedTuple


class SendTurn(NamedTuple):
    #: When the request may leave (>= now).
    at: float
    #: The earliest the lease's next request may leave after it.
    next_send: float


def send_turn(next_send: float, rest_until: float, rate: float | None, now: float) -> SendTurn:
    """The turn of a request through a lease whose next request may leave at ``next_send``,
    that rests until ``rest_until``, paced at ``rate`` a second (None: unpaced)."""
    at = max(now, rest_until)
    if rate is None:
        return SendTurn(at, next_send)
    at = max(at, next_send)
    return SendTurn(at, at + 1.0 / rate)
