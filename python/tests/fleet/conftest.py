"""The fleet tests run against a real discovery API that test/python/pytest.unit.test.ts starts
(fleet_env.py says what it holds)."""

from __future__ import annotations

import os

import pytest
from fleet_env import Fleet

NAMES = ("DISCOVERY_URL", "DISCOVERY_TOKEN", "DISCOVERY_TOKEN_OTHER", "DISCOVERY_URL_PREDATING")


@pytest.fixture
def fleet() -> Fleet:
    values = [os.environ.get(name, "") for name in NAMES]
    if not all(values):
        pytest.fail(f"{', '.join(NAMES)} name the API to test against (test/python/pytest.unit.test.ts sets them)")
    return Fleet(*values)
