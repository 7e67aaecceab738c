"""Every PROXY_OPERATOR_* setting is checked when the crawl starts: a bad value is a
SettingError naming the key and what it takes, never NotConfigured (Scrapy would disable the
middleware and crawl without proxies), a bare ValueError, or a value that drops every request."""

from __future__ import annotations

from typing import Any

import pytest

from proxy_operator import DiscoveryClient
from proxy_operator.scrapy.settings import SettingError, make_client, make_policy, read_settings

URL = {"PROXY_OPERATOR_URL": "http://127.0.0.1:8090"}


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("PROXY_OPERATOR_URL", None, "PROXY_OPERATOR_URL is not set: it must be the discovery API's URL"),
        ("PROXY_OPERATOR_URL", "", "PROXY_OPERATOR_URL is not set"),
        ("PROXY_OPERATOR_URL", 8090, r"PROXY_OPERATOR_URL must be the discovery API's URL \(http:// or https://, e.g. http://localhost:8090\), got int 8090"),
        ("PROXY_OPERATOR_URL", ["http://a:1"], "PROXY_OPERATOR_URL must be the discovery API's URL .*, got list"),
        ("PROXY_OPERATOR_URL", "localhost:8090", "PROXY_OPERATOR_URL must be .*, got 'localhost:8090'"),
        ("PROXY_OPERATOR_URL", "ftp://api:8090", "PROXY_OPERATOR_URL must be"),
        ("PROXY_OPERATOR_URL", "http://", "PROXY_OPERATOR_URL must be"),
        ("PROXY_OPERATOR_URL", "http://[::1", "PROXY_OPERATOR_URL must be"),
        ("PROXY_OPERATOR_TOKEN", 42, "PROXY_OPERATOR_TOKEN must be a string"),
        ("PROXY_OPERATOR_SELECTOR", "geo=eu", "PROXY_OPERATOR_SELECTOR must be a dict of attribute to value, or its JSON .*, got 'geo=eu'"),
        ("PROXY_OPERATOR_SELECTOR", '["eu"]', "PROXY_OPERATOR_SELECTOR must be a dict .*, got list"),
        ("PROXY_OPERATOR_SELECTOR", {"geo": 1}, "PROXY_OPERATOR_SELECTOR .*every value a string, got 'geo': 1"),
        ("PROXY_OPERATOR_SELECTOR", {"": "eu"}, "PROXY_OPERATOR_SELECTOR .*every key a non-empty string"),
        ("PROXY_OPERATOR_TTL", "abc", "PROXY_OPERATOR_TTL must be an integer from 1 to 3600, got 'abc'"),
        ("PROXY_OPERATOR_TTL", 0, "PROXY_OPERATOR_TTL must be an integer from 1 to 3600, got 0"),
        ("PROXY_OPERATOR_TTL", -5, "PROXY_OPERATOR_TTL must be an integer from 1 to 3600"),
        ("PROXY_OPERATOR_TTL", 3601, "PROXY_OPERATOR_TTL must be an integer from 1 to 3600, got 3601"),
        ("PROXY_OPERATOR_TTL", 1.5, "PROXY_OPERATOR_TTL must be an integer"),
        ("PROXY_OPERATOR_TTL", True, "PROXY_OPERATOR_TTL must be an integer"),
        ("PROXY_OPERATOR_REQUESTS_PER_LEASE", 0, "PROXY_OPERATOR_REQUESTS_PER_LEASE must be an integer, at least 1, got 0"),
        ("PROXY_OPERATOR_MAX_LEASES_PER_SITE", 0, "PROXY_OPERATOR_MAX_LEASES_PER_SITE must be an integer, at least 1, got 0"),
        ("PROXY_OPERATOR_MAX_LEASES_PER_SITE", "many", "PROXY_OPERATOR_MAX_LEASES_PER_SITE must be an integer"),
        ("PROXY_OPERATOR_MAX_WAIT", -1, "PROXY_OPERATOR_MAX_WAIT must be a number of seconds above 0, got -1"),
        ("PROXY_OPERATOR_MAX_WAIT", 0, "PROXY_OPERATOR_MAX_WAIT must be a number of seconds above 0"),
        ("PROXY_OPERATOR_MAX_WAIT", "soon", "PROXY_OPERATOR_MAX_WAIT must be a number of seconds above 0, got 'soon'"),
        ("PROXY_OPERATOR_MAX_WAIT", float("inf"), "PROXY_OPERATOR_MAX_WAIT must be a number of seconds above 0"),
        ("PROXY_OPERATOR_OK_REPORT_INTERVAL", 0, "PROXY_OPERATOR_OK_REPORT_INTERVAL must be a number of seconds above 0"),
        ("PROXY_OPERATOR_RETRY_TIMES", -1, "PROXY_OPERATOR_RETRY_TIMES must be an integer, at least 0, got -1"),
        ("PROXY_OPERATOR_MAX_REROUTES", -1, "PROXY_OPERATOR_MAX_REROUTES must be an integer, at least 0, got -1"),
        ("PROXY_OPERATOR_MAX_REROUTES", "always", "PROXY_OPERATOR_MAX_REROUTES must be an integer, at least 0, got 'always'"),
        ("PROXY_OPERATOR_CLIENT", "no.such.Client", "PROXY_OPERATOR_CLIENT names nothing importable: 'no.such.Client'"),
        ("PROXY_OPERATOR_CLIENT", 42, "PROXY_OPERATOR_CLIENT must be a class or an import path to one"),
        ("PROXY_OPERATOR_BAN_POLICY", "proxy_operator.NoSuchPolicy", "PROXY_OPERATOR_BAN_POLICY names nothing importable"),
    ],
)
def test_a_bad_setting_is_an_error_naming_it(key: str, value: Any, error: str) -> None:
    with pytest.raises(SettingError, match=error) as raised:
        read_settings({**URL, key: value})
    assert raised.value.key == key


@pytest.mark.parametrize(
    ("key", "value", "read"),
    [
        ("PROXY_OPERATOR_TTL", "60", 60),
        ("PROXY_OPERATOR_TTL", 3600, 3600),
        ("PROXY_OPERATOR_TTL", None, 120),
        ("PROXY_OPERATOR_SELECTOR", '{"geo": "eu"}', {"geo": "eu"}),
        ("PROXY_OPERATOR_SELECTOR", {"geo": "eu"}, {"geo": "eu"}),
        ("PROXY_OPERATOR_SELECTOR", None, {}),
        ("PROXY_OPERATOR_MAX_WAIT", "0.5", 0.5),
        ("PROXY_OPERATOR_MAX_LEASES_PER_SITE", 1, 1),
        ("PROXY_OPERATOR_RETRY_TIMES", 0, 0),
        ("PROXY_OPERATOR_MAX_REROUTES", None, 10),
        ("PROXY_OPERATOR_MAX_REROUTES", "3", 3),
        ("PROXY_OPERATOR_MAX_REROUTES", 0, 0),
    ],
)
def test_a_good_setting_is_read(key: str, value: Any, read: Any) -> None:
    config = read_settings({**URL, key: value})
    got = {
        "PROXY_OPERATOR_TTL": config.options.ttl_seconds,
        "PROXY_OPERATOR_SELECTOR": dict(config.options.selector),
        "PROXY_OPERATOR_MAX_WAIT": config.options.max_wait_seconds,
        "PROXY_OPERATOR_MAX_LEASES_PER_SITE": config.options.max_leases_per_site,
        "PROXY_OPERATOR_RETRY_TIMES": config.retry_times,
        "PROXY_OPERATOR_MAX_REROUTES": config.max_reroutes,
    }[key]
    assert got == read


class Failing:
    def __init__(self, url: str, token: str | None = None) -> None:
        raise ConnectionError("no credentials file")


class NoArgsPolicy:
    def __init__(self, strictness: int) -> None:
        pass


@pytest.mark.parametrize(
    ("client", "error"),
    [
        (DiscoveryClient, "PROXY_OPERATOR_CLIENT must make an asyncio client .* DiscoveryClient blocks Scrapy's event loop"),
        ("proxy_operator.DiscoveryClient", "PROXY_OPERATOR_CLIENT must make an asyncio client"),
        (Failing, r"PROXY_OPERATOR_CLIENT Failing\(url, token=...\) failed: ConnectionError: no credentials file"),
    ],
)
def test_a_client_that_cannot_serve_the_crawl_is_an_error_naming_the_setting(client: Any, error: str) -> None:
    config = read_settings({**URL, "PROXY_OPERATOR_CLIENT": client})
    with pytest.raises(SettingError, match=error):
        make_client(config)


def test_a_policy_that_cannot_be_built_is_an_error_naming_the_setting() -> None:
    config = read_settings({**URL, "PROXY_OPERATOR_BAN_POLICY": NoArgsPolicy})
    with pytest.raises(SettingError, match="PROXY_OPERATOR_BAN_POLICY could not be built: TypeError"):
        make_policy(config)
