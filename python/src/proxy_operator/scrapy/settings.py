"""The add-on's settings, read and checked once, when the crawl starts. A bad value stops the
start-up with a ``SettingError`` naming the key and what it takes: never Scrapy's
``NotConfigured`` (Scrapy reads it as "disable this component", and every request would then go
out without a proxy), never a bare ValueError from deep in the crawl, never a value that makes
every request wait and be dropped.

``read_settings`` is pure (a mapping in, a value or an error out); ``make_client`` builds the
client the settings name and checks that it suits the event loop.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from scrapy.utils.misc import load_object

from ..client import AsyncDiscoveryClient
from .leases import BookOptions
from .policy import BanPolicy

#: The discovery API's bound on a lease's TTL (``ttlSeconds``), seconds.
MAX_TTL_SECONDS = 3600


class SettingError(ValueError):
    """A setting of the add-on the crawl cannot start with; ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key} {message}")
        self.key = key


@dataclass(frozen=True)
class AddonSettings:
    url: str
    token: str | None
    client_class: Callable[..., Any]
    policy_class: Callable[[], Any]
    options: BookOptions
    retry_times: int
    max_reroutes: int


def read_settings(settings: Mapping[str, Any]) -> AddonSettings:
    """Every PROXY_OPERATOR_* setting, checked (Scrapy's ``crawler.settings`` is such a mapping;
    values may be strings, as ``scrapy crawl -s KEY=VALUE`` gives them)."""
    defaults = BookOptions()
    return AddonSettings(
        url=_url(settings.get("PROXY_OPERATOR_URL")),
        token=_token(settings.get("PROXY_OPERATOR_TOKEN")),
        client_class=_object("PROXY_OPERATOR_CLIENT", settings.get("PROXY_OPERATOR_CLIENT"), AsyncDiscoveryClient),
        policy_class=_object("PROXY_OPERATOR_BAN_POLICY", settings.get("PROXY_OPERATOR_BAN_POLICY"), BanPolicy),
        options=BookOptions(
            selector=_selector(settings.get("PROXY_OPERATOR_SELECTOR")),
            ttl_seconds=_int("PROXY_OPERATOR_TTL", settings.get("PROXY_OPERATOR_TTL"), 120, 1, MAX_TTL_SECONDS),
            requests_per_lease=_int(
                "PROXY_OPERATOR_REQUESTS_PER_LEASE", settings.get("PROXY_OPERATOR_REQUESTS_PER_LEASE"), 2, 1
            ),
            max_leases_per_site=_int(
                "PROXY_OPERATOR_MAX_LEASES_PER_SITE", settings.get("PROXY_OPERATOR_MAX_LEASES_PER_SITE"), 32, 1
            ),
            max_wait_seconds=_seconds("PROXY_OPERATOR_MAX_WAIT", settings.get("PROXY_OPERATOR_MAX_WAIT"), 60.0),
            ok_report_interval_seconds=_seconds(
                "PROXY_OPERATOR_OK_REPORT_INTERVAL",
                settings.get("PROXY_OPERATOR_OK_REPORT_INTERVAL"),
                defaults.ok_report_interval_seconds,
            ),
        ),
        retry_times=_int("PROXY_OPERATOR_RETRY_TIMES", settings.get("PROXY_OPERATOR_RETRY_TIMES"), 10, 0),
        max_reroutes=_int("PROXY_OPERATOR_MAX_REROUTES", settings.get("PROXY_OPERATOR_MAX_REROUTES"), 10, 0),
    )


def make_client(config: AddonSettings) -> Any:
    """The client PROXY_OPERATOR_CLIENT names, built with the URL and token. One that cannot be
    built, or whose calls are not coroutines (the blocking DiscoveryClient would stall Scrapy's
    event loop on every call), stops the start-up naming the key."""
    key = "PROXY_OPERATOR_CLIENT"
    name = getattr(config.client_class, "__qualname__", repr(config.client_class))
    try:
        client = config.client_class(config.url, token=config.token)
    except Exception as err:  # noqa: BLE001 - any failure is the setting's: said with its key
        raise SettingError(key, f"{name}(url, token=...) failed: {type(err).__name__}: {err}") from err
    if not inspect.iscoroutinefunction(getattr(client, "lease", None)):
        raise SettingError(
            key,
            f"must make an asyncio client whose calls are coroutines (as AsyncDiscoveryClient's); {name} "
            "blocks Scrapy's event loop on every call",
        )
    return client


def make_policy(config: AddonSettings) -> Any:
    try:
        return config.policy_class()
    except Exception as err:  # noqa: BLE001 - any failure is the setting's: said with its key
        raise SettingError("PROXY_OPERATOR_BAN_POLICY", f"could not be built: {type(err).__name__}: {err}") from err


# -- one setting each: the value or a SettingError naming it ---------------------------------------


def _url(value: Any) -> str:
    key, what = "PROXY_OPERATOR_URL", "must be the discovery API's URL (http:// or https://, e.g. http://localhost:8090)"
    if value is None or value == "":
        # The crawl does not start: without the API there is no proxy, and no request goes without one.
        raise SettingError(key, f"is not set: it {what}")
    if not isinstance(value, str):
        raise SettingError(key, f"{what}, got {type(value).__name__} {value!r}")
    try:
        parts = urlsplit(value.strip())
        host = parts.hostname
    except ValueError:
        host = None
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise SettingError(key, f"{what}, got {value!r}")
    return value.strip()


def _token(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise SettingError("PROXY_OPERATOR_TOKEN", f"must be a string (the API's bearer token), got {type(value).__name__}")
    return value


def _selector(value: Any) -> dict[str, str]:
    key = "PROXY_OPERATOR_SELECTOR"
    what = 'must be a dict of attribute to value, or its JSON (e.g. {"geo": "eu"})'
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise SettingError(key, f"{what}, got {value!r}") from None
    if not isinstance(value, Mapping):
        raise SettingError(key, f"{what}, got {type(value).__name__} {value!r}")
    for name, item in value.items():
        if not isinstance(name, str) or not name or not isinstance(item, str):
            raise SettingError(key, f"{what}: every key a non-empty string, every value a string, got {name!r}: {item!r}")
    return dict(value)


def _int(key: str, value: Any, default: int, low: int, high: int | None = None) -> int:
    allowed = f"an integer from {low} to {high}" if high is not None else f"an integer, at least {low}"
    if value is None or value == "":
        return default
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None or number < low or (high is not None and number > high):
        raise SettingError(key, f"must be {allowed}, got {value!r}")
    return number


def _seconds(key: str, value: Any, default: float) -> float:
    if value is None or value == "":
        return default
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise SettingError(key, f"must be a number of seconds above 0, got {value!r}")
    return number


def _object(key: str, value: Any, default: Callable[..., Any]) -> Callable[..., Any]:
    if value is None or value == "":
        return default
    if isinstance(value, str):
        try:
            loaded = load_object(value)
        except (ImportError, NameError, ValueError, AttributeError) as err:
            raise SettingError(key, f"names nothing importable: {value!r} ({err})") from err
        value = loaded
    if not callable(value):
        raise SettingError(key, f"must be a class or an import path to one, got {value!r}")
    result: Callable[..., Any] = value
    return result
