"""The live tests run against a real discovery API that test/python/pytest.unit.test.ts
starts (one healthy proxy, ``demo/p0``, with a token): DISCOVERY_URL and DISCOVERY_TOKEN."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def api() -> tuple[str, str]:
    url, token = os.environ.get("DISCOVERY_URL"), os.environ.get("DISCOVERY_TOKEN")
    if not url or not token:
        pytest.fail("DISCOVERY_URL and DISCOVERY_TOKEN name the API to test against (npm run test:python sets them)")
    return url, token
