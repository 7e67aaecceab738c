"""A leased request's download slot is per site and exit: the slot Scrapy would have used (the
spider's own ``meta['download_slot']``, or the host) at the proxy, and the project's
``DOWNLOAD_SLOTS`` settings for that slot go with it. Before, the slot was always
``<host>@<proxy>``: a spider's own slot was overwritten and ``DOWNLOAD_SLOTS`` applied to nothing.
The real crawl is in test/python/scrapy-neighbours.unit.test.ts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scrapy import Request

from addon_fixtures import FakeApi, middleware_with
from proxy_operator.scrapy.meta_keys import LEASE_KEY
from proxy_operator.scrapy.slots import inherit


@pytest.mark.parametrize(
    ("per_slot", "base", "key", "after"),
    [
        ({"shop.example": {"delay": 2}}, "shop.example", "shop.example@ns/p0", {"delay": 2}),
        ({}, "shop.example", "shop.example@ns/p0", None),  # nothing set: Scrapy's defaults
        # The project named the exit's slot itself: its own settings stand.
        ({"shop.example": {"delay": 2}, "shop.example@ns/p0": {"delay": 9}}, "shop.example", "shop.example@ns/p0", {"delay": 9}),
    ],
)
def test_the_projects_slot_settings_go_with_the_slot_to_each_exit(
    per_slot: dict[str, Any], base: str, key: str, after: dict[str, Any] | None
) -> None:
    inherit(per_slot, base, key)
    assert per_slot.get(key) == after


@pytest.mark.parametrize(
    ("meta", "site"),
    [
        ({}, "shop.example"),  # the host, as Scrapy's own slot
        ({"download_slot": "shops"}, "shops"),  # the spider's own slot (before: overwritten)
    ],
)
def test_a_leased_request_waits_in_its_sites_slot_at_its_proxy(meta: dict[str, Any], site: str) -> None:
    middleware = middleware_with(FakeApi)

    async def run() -> list[tuple[str, str]]:
        await middleware.spider_opened()
        request = Request("http://shop.example/a", meta=dict(meta))
        await middleware.process_request(request)
        # RetryMiddleware's copy (meta copied: the old lease and slot in it) is leased again.
        copy = request.replace(dont_filter=True)
        await middleware.process_request(copy)
        await middleware.spider_closed()
        return [(r.meta["download_slot"], f"{site}@{r.meta[LEASE_KEY].proxy_id}") for r in (request, copy)]

    for slot, expected in asyncio.run(run()):
        assert slot == expected
