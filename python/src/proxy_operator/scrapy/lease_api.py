"""What the lease book needs of the discovery client (AsyncDiscoveryClient has it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..types import Lease, Report, ReportResult


class LeaseApi(Protocol):
    """What the book needs of the discovery client (AsyncDiscoveryClient has it)."""

    async def lease(
        self,
        *,
        selector: Mapping[str, str] | None = ...,
        target: str | None = ...,
        session: str | None = ...,
        ttl_seconds: int | None = ...,
        exit_ip: str | None = ...,
        exclude: Sequence[str] | None = ...,
    ) -> Lease: ...
    async def renew(self, lease_id: str, ttl_seconds: int | None = ...) -> Lease: ...
    async def release(self, lease_id: str) -> None: ...
    async def report(
        self,
        lease_id: str,
        result: ReportResult,
        *,
        target: str | None = ...,
        retry_after_seconds: int | None = ...,
        release: bool = ...,
    ) -> dict[str, object]: ...
    async def report_many(self, reports: list[Report]) -> list[dict[str, object]]: ...
    async def end_session(self, key: str) -> None: ...

