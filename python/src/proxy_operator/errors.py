"""Errors of the discovery API: every error answer is ``{error, message}`` with a stable code."""

from __future__ import annotations

from typing import Literal

NoLeaseCode = Literal["no_match", "all_busy", "all_cooling_down"]
NO_LEASE_CODES: frozenset[str] = frozenset({"no_match", "all_busy", "all_cooling_down"})


class DiscoveryApiError(Exception):
    """A non-2xx answer of the discovery API."""

    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        #: The answer's Retry-After in seconds (429, and 409 all_cooling_down), if any.
        self.retry_after = retry_after


class NoLease(DiscoveryApiError):
    """409: nothing leasable (``no_match``, ``all_busy`` or ``all_cooling_down``)."""


def is_no_lease(err: BaseException) -> bool:
    return isinstance(err, NoLease)


def refused_field(err: BaseException, field: str) -> bool:
    """Whether ``err`` is an operator older than a request field refusing it: its parser's
    ``400 invalid_request`` "unknown field(s) '<field>'". The caller sends the call again without
    the field (and, from then on, every call)."""
    return (
        isinstance(err, DiscoveryApiError)
        and err.status == 400
        and err.code == "invalid_request"
        and err.message.startswith("unknown field(s)")
        and f"'{field}'" in err.message
    )
