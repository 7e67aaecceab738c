"""Which requests a proxy can carry. Scrapy honours ``meta['proxy']`` only in its HTTP(S)
handler: its FTP and S3 handlers (and any other) connect straight to the host whatever the
meta says, so a lease given to such a request would be a request sent without a proxy. Pure."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

#: ``proxy``: leased and sent through the proxy; ``local``: never leaves the machine (data:,
#: file:), so no lease and no proxy; ``refuse``: a network scheme a proxy cannot carry, dropped.
Route = Literal["proxy", "local", "refuse"]

PROXIED_SCHEMES = frozenset({"http", "https"})
LOCAL_SCHEMES = frozenset({"data", "file"})


def route_of(url: str) -> Route:
    scheme = urlsplit(url).scheme.lower()
    if scheme in PROXIED_SCHEMES:
        return "proxy"
    if scheme in LOCAL_SCHEMES:
        return "local"
    return "refuse"
