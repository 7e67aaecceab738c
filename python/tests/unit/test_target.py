"""The one canonical target: a lower-case host name, no scheme, port or path."""

from __future__ import annotations

import pytest

from proxy_operator import target_of


@pytest.mark.parametrize(
    ("given", "target"),
    [
        ("shop.example", "shop.example"),
        ("Shop.Example", "shop.example"),
        ("https://shop.example/", "shop.example"),
        ("https://SHOP.example:443/a/b?c=d#e", "shop.example"),
        ("shop.example:8443", "shop.example"),
        ("http://user:pass@shop.example/", "shop.example"),
        ("shop.example.", "shop.example"),
        ("http://[2001:DB8::1]:8080/", "2001:db8::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("www.shop.example", "www.shop.example"),  # another host: its own cooldowns
    ],
)
def test_a_target_is_a_host_name(given: str, target: str) -> None:
    assert target_of(given) == target


@pytest.mark.parametrize("given", ["", "https://", "/just/a/path"])
def test_no_host_is_an_error_naming_the_target(given: str) -> None:
    with pytest.raises(ValueError, match="target"):
        target_of(given)
