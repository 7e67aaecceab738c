"""When a held lease is renewed, released or kept, as a table (TTL 120 s: renewal at 40 s left)."""

from __future__ import annotations

import pytest

from proxy_operator.scrapy.renewal import renewal_action


@pytest.mark.parametrize(
    ("seconds_left", "used", "action"),
    [
        (100.0, True, "keep"),
        (41.0, True, "keep"),
        (40.0, True, "renew"),  # a third of the TTL left, and in use
        (10.0, True, "renew"),
        (40.0, False, "release"),  # unused since its last renewal: given back
        (0.0, False, "release"),
        (100.0, False, "keep"),
    ],
)
def test_a_third_of_the_ttl_left(seconds_left: float, used: bool, action: str) -> None:
    assert renewal_action(1000.0, 1000.0 + seconds_left, 120.0, used) == action
