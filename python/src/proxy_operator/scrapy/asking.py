"""A site's ask for one more lease: whether it may ask now, which proxies the ask excludes, and
what the server's answer means. Pure: the lease book (leases.py) acts on these verdicts.

The server grants the least used matching proxy, counting every owner's leases, so with another
team's load in the book "least used" can be a proxy the site already holds while others sit
unused by it (issue 48). An ask without a session therefore names the site's held proxies in
``exclude``: a grant is always a proxy new to the site, and only a refusal says the site's
leases cover what the fleet can give it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..client import MAX_EXCLUDED
from ..errors import DiscoveryApiError

#: What a grant means: use it; give it back (the book is closing); or give it back and stop
#: asking for a while (a proxy the site holds: the server had nothing better for it).
GrantVerdict = Literal["keep", "release", "covered", "stale"]
#: What a 409 means: the site's leases cover what the fleet gives it (stop asking for a while,
#: its requests share them); or the server has nothing for the site (wait, ask again).
RefusalVerdict = Literal["covered", "refused"]


def may_ask(*, asking: bool, live: int, now: float, refused_until: float, saturated_until: float) -> bool:
    """One ask at a time, none while a refusal is waited out, none while the site's leases cover
    the fleet, unless it has no live lease left (then they cover nothing)."""
    if asking or now < refused_until:
        return False
    return live == 0 or now >= saturated_until


def to_exclude(held: Iterable[str], *, session: str | None, supported: bool) -> list[str]:
    """The proxy ids an ask names in ``exclude``: the site's live leases' proxies, each once, at
    most MAX_EXCLUDED (a site holding more has plenty); none for a sticky session (the server
    keeps a session on its proxy and refuses ``exclude`` with it) or against an operator that
    predates the field."""
    if session is not None or not supported:
        return []
    return list(dict.fromkeys(held))[:MAX_EXCLUDED]


def after_grant(
    proxy_id: str, held: Iterable[str], *, closed: bool, dead_since: float | None = None, asked_at: float = 0.0
) -> GrantVerdict:
    """A proxy the site holds is given back and ends the asking for a while. With every held proxy
    excluded the server never grants one; without (an older operator, more than MAX_EXCLUDED
    held) it is the old reading: the least used proxy is one the site holds. A proxy this crawl
    reported unreachable (``dead_since``: when the server answered the report, infinite while it
    has not) after the ask left is given back: the server granted it before it heard the report;
    so is one reported banned for the site (``out_since``)."""
    if closed:
        return "release"
    if dead_since is not None and dead_since >= asked_at:
        return "stale"
    return "covered" if proxy_id in set(held) else "keep"


def out_since(dead_since: float | None, banned_since: float | None) -> float | None:
    """When the server took the latest report that put a proxy out for a site (unreachable, or
    banned for the site; infinite while one is not answered), for after_grant's ``dead_since``."""
    known = [at for at in (dead_since, banned_since) if at is not None]
    return max(known) if known else None


def after_refusal(code: str, excluded: Iterable[str]) -> RefusalVerdict:
    """A refusal of an ask that excluded the site's proxies says nothing is free besides them:
    covered. Without an exclusion it is the server's word for the site: nothing to lease now.
    ``no_match`` (the selector matches no proxy) is that word whatever was excluded."""
    if code == "no_match" or not any(True for _ in excluded):
        return "refused"
    return "covered"


def covered_for(code: str, retry_after: float | None, saturated_seconds: float) -> float:
    """How long a covered site asks no more: ``saturated_seconds``, or until the first cooldown
    of the other proxies ends (``all_cooling_down``'s Retry-After) when that is sooner: a rate
    limit rests proxies for seconds, and the site spreads again once they are back."""
    if code == "all_cooling_down" and retry_after:
        return min(retry_after, saturated_seconds)
    return saturated_seconds


#: What a failed ask (anything but a 409 refusal) means. ``retry``: the API did not answer or
#: failed on its side (a connection error, a 5xx, a 429 or 503 the client waited out): asked
#: again a second later, and a request that gets no lease meanwhile is dropped with this cause.
#: ``drop``: the site's own requests were refused (a 400 naming their ``session`` or ``target``):
#: asking again gets the same 400, so they are dropped at once. ``stop``: every ask will fail
#: the same way (the token refused, a setting refused, the URL not the discovery API): the
#: crawl stops, naming the setting.
FailureVerdict = Literal["retry", "drop", "stop"]


@dataclass(frozen=True)
class AskFailure:
    verdict: FailureVerdict
    reason: str


#: A 400's first word (the request field the API names) -> the setting that sent it.
_SETTING_OF_FIELD = {"ttlSeconds": "PROXY_OPERATOR_TTL", "selector": "PROXY_OPERATOR_SELECTOR"}
#: A 400's first word -> the part of a request that sent it.
_REQUEST_FIELD = {"session": "its meta['proxy_operator_session']", "target": "its host"}


def after_failure(err: BaseException) -> AskFailure:
    if not isinstance(err, DiscoveryApiError):
        return AskFailure("retry", f"the discovery API did not answer ({type(err).__name__}: {err})")
    answer = f"{err.status} {err.code}: {err.message}"
    if err.status == 401:
        return AskFailure("stop", f"the discovery API refused PROXY_OPERATOR_TOKEN ({answer})")
    if err.status == 403:
        return AskFailure("stop", f"PROXY_OPERATOR_TOKEN may not lease these proxies ({answer})")
    if err.status in (404, 405):
        return AskFailure("stop", f"PROXY_OPERATOR_URL does not look like the discovery API ({answer})")
    if err.status == 400:
        field = err.message.split(" ", 1)[0].split(".", 1)[0].split("[", 1)[0]
        if field in _SETTING_OF_FIELD:
            return AskFailure("stop", f"the discovery API refused {_SETTING_OF_FIELD[field]} ({answer})")
        if field in _REQUEST_FIELD:
            return AskFailure("drop", f"the discovery API refused {_REQUEST_FIELD[field]} ({answer})")
        return AskFailure("drop", f"the discovery API refused the lease ask ({answer})")
    if err.status in (408, 429) or err.status >= 500:
        return AskFailure("retry", f"the discovery API failed ({answer})")
    return AskFailure("drop", f"the discovery API refused the lease ask ({answer})")


def quota_covers(err: BaseException, live: int) -> bool:
    """A 429 ``lease_quota`` (the token holds every live lease it may) to a site that holds a
    lease: those are all the site can have for now, as when a refusal says they cover the fleet
    (``covered``: it stops asking a while, or until one of its leases ends). Asked again every
    second instead, a site spent four calls a second on 429s (the client waits each out) and
    logged a warning each time. Without a live lease it is a failure to wait out
    (after_failure: ``retry``), its requests dropped with the cause after the wait."""
    return isinstance(err, DiscoveryApiError) and err.status == 429 and err.code == "lease_quota" and live > 0
