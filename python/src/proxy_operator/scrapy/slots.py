"""Which download slot a leased request waits in. The add-on makes it per site and exit
(``<slot>@<proxy>``), so a slot's concurrency and delay apply per exit address. The site's part
is the slot Scrapy would have used: the spider's own ``meta['download_slot']`` (several hosts
grouped in one slot, say) or the host; and ``DOWNLOAD_SLOTS`` settings the project gave that
slot go with it to each of its exits. Before, the slot was always ``<host>@<proxy>``: a
spider's own slot was overwritten, and ``DOWNLOAD_SLOTS = {"shop.example": {"delay": 2}}``
applied to nothing (Scrapy looks the settings up by the slot's key). Pure."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any


def slot_of(base: str, proxy_id: str) -> str:
    return f"{base}@{proxy_id}"


def inherit(per_slot: MutableMapping[str, Any], base: str, key: str) -> None:
    """``DOWNLOAD_SLOTS[base]`` (if the project set it) for the slot ``key`` too, unless the
    project named that key itself (Scrapy reads the mapping when it makes the slot)."""
    settings = per_slot.get(base)
    if isinstance(settings, Mapping) and key not in per_slot:
        per_slot[key] = dict(settings)
