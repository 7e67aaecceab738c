"""The body of ``POST /v1/leases`` both clients send, and ``exclude`` checked as the server checks
it (discovery/request-parsing.ts): a caller's mistake is a ValueError naming the field before any
call. The live tests (python/tests/fleet) show the server agrees on the same values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from proxy_operator import DiscoveryApiError, NoLease, refused_field
from proxy_operator.client import _lease_body


def body(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"selector": None, "target": None, "session": None, "ttl_seconds": None, "exit_ip": None}
    return _lease_body(**{**args, **kw})


@pytest.mark.parametrize(
    ("exclude", "sent"),
    [
        (None, None),
        ([], None),  # excludes nothing: not sent, so an operator older than the field takes the call
        (["crawl/proxy-3"], ["crawl/proxy-3"]),
        (("a/b", "c/d.e-f"), ["a/b", "c/d.e-f"]),  # any sequence
        ([f"ns/p{i}" for i in range(100)], [f"ns/p{i}" for i in range(100)]),  # the API's bound
    ],
)
def test_exclude_is_sent(exclude: Sequence[str] | None, sent: list[str] | None) -> None:
    assert body(target="shop.example", exclude=exclude).get("exclude") == sent


@pytest.mark.parametrize(
    ("exclude", "session", "error"),
    [
        ([f"ns/p{i}" for i in range(101)], None, "exclude has 101 proxy ids; at most 100"),
        (["ns/a"], "job-1", "exclude does not go with session"),
        ([], "job-1", "exclude does not go with session"),  # as the server: the field at all
        ("ns/a", None, "exclude must be a sequence of proxy ids"),  # a string is not a list of ids
        (["ns/a", "no-slash"], None, "exclude[1] must be a proxy id (namespace/name), got 'no-slash'"),
        (["NS/a"], None, "exclude[0] must be a proxy id"),  # ids are lower-case (Kubernetes names)
        (["ns/a/b"], None, "exclude[0] must be a proxy id"),
        ([3], None, "exclude[0] must be a proxy id (namespace/name), got 3"),
    ],
)
def test_a_bad_exclude_is_an_error_naming_it(exclude: Any, session: str | None, error: str) -> None:
    with pytest.raises(ValueError, match=r"^exclude") as err:
        body(exclude=exclude, session=session)
    assert error in str(err.value)


@pytest.mark.parametrize(
    ("err", "refused"),
    [
        # An operator older than the field: its parser's answer.
        (
            DiscoveryApiError(400, "invalid_request", "unknown field(s) 'exclude'; allowed: selector, exitIP"),
            True,
        ),
        (DiscoveryApiError(400, "invalid_request", "unknown field(s) 'release'; allowed: result"), False),
        # Today's operator naming the field for a bad value: not a missing field.
        (DiscoveryApiError(400, "invalid_request", "exclude has 101 proxy ids; at most 100"), False),
        (NoLease(409, "all_busy", "every match excluded"), False),
    ],
)
def test_an_older_operator_refuses_the_field(err: DiscoveryApiError, refused: bool) -> None:
    assert refused_field(err, "exclude") is refused
