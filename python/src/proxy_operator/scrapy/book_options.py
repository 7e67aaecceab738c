"""The lease book's options (the add-on's PROXY_OPERATOR_* settings, read in settings.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BookOptions:
    selector: Mapping[str, str] = field(default_factory=dict)
    ttl_seconds: int = 120
    #: Requests in flight on a lease before the site asks for one more.
    requests_per_lease: int = 2
    #: Leases one site takes at most (a sticky session takes one).
    max_leases_per_site: int = 32
    #: How long a request waits for a lease (all_busy, all_cooling_down) before it fails.
    max_wait_seconds: float = 60.0
    #: At most one batched ok report per lease this often (and one at its release).
    ok_report_interval_seconds: float = 30.0
    #: Once the site's leases cover what the fleet gives it (an ask excluding its proxies was
    #: refused; against an older operator, a proxy it holds was granted), stop asking this long.
    saturated_seconds: float = 30.0
    #: At close, how long the calls still in the background (a ban report the API has not
    #: answered) are waited for before they are given up; as long again for the last releases.
    close_wait_seconds: float = 10.0
