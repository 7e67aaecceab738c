"""Client of the proxy-operator discovery API, and (``proxy_operator.scrapy``) a Scrapy add-on."""

from .client import AsyncDiscoveryClient, DiscoveryClient, retry_after_seconds
from .errors import DiscoveryApiError, NoLease, is_no_lease, refused_field
from .target import target_of
from .types import Lease, Report, ReportResult

__all__ = [
    "AsyncDiscoveryClient",
    "DiscoveryApiError",
    "DiscoveryClient",
    "Lease",
    "NoLease",
    "Report",
    "ReportResult",
    "is_no_lease",
    "refused_field",
    "retry_after_seconds",
    "target_of",
]
