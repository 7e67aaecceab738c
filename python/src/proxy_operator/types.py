"""The discovery API's objects, as the client returns them (plain dicts are kept as they came)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ReportResult = Literal["ok", "banned", "rate_limited", "unreachable"]
REPORT_RESULTS: frozenset[str] = frozenset({"ok", "banned", "rate_limited", "unreachable"})


@dataclass(frozen=True)
class Lease:
    lease_id: str
    #: ``namespace/name`` of the Proxy: stable across replacements.
    proxy_id: str
    #: ``http://ip:port`` or ``http://user:pass@ip:port``: carries a secret, do not log it.
    proxy_url: str
    expires_at: str
    target: str | None
    session: str | None = None
    #: The whole answer, for fields this class does not name.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Lease:
        proxy = body["proxy"]
        session = body.get("session")
        return cls(
            lease_id=body["leaseID"],
            proxy_id=proxy["id"],
            proxy_url=proxy["url"],
            expires_at=body["expiresAt"],
            target=body.get("target"),
            session=session["key"] if isinstance(session, dict) else None,
            raw=body,
        )


@dataclass(frozen=True)
class Report:
    """One report of ``POST /v1/reports``."""

    lease_id: str
    result: ReportResult
    target: str | None = None
    retry_after_seconds: int | None = None
    release: bool = False

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"leaseID": self.lease_id, "result": self.result}
        if self.target is not None:
            body["target"] = self.target
        if self.retry_after_seconds is not None:
            body["retryAfterSeconds"] = self.retry_after_seconds
        if self.release:
            body["release"] = True
        return body
