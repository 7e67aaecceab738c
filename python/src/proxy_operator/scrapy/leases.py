"""The crawl's leases: per site (a host name, and a sticky session when a request names one)
a few leases, shared by every request to that site, asked for as the crawl needs them; the
reports that follow each response; renewal, batched ok reports and the release at the end.

No Scrapy here: the middleware translates Scrapy's events into these calls. Every call to the
discovery API is awaited on the event loop (never a blocking call), and the clock is injected.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import DiscoveryApiError, NoLease, refused_field
from ..types import Lease, Report, ReportResult
from .asking import FailureVerdict, after_failure, after_grant, after_refusal, covered_for, may_ask, to_exclude
from . import pace as paces
from .pace import UNPACED, Pace
from .renewal import renewal_action

log = logging.getLogger("proxy_operator")

SiteKey = tuple[str, "str | None"]


class LeaseFailed(Exception):
    """A request gets no lease because asking failed (not a 409 refusal: that is NoLease);
    ``verdict`` says whether only this site's requests fail or the whole crawl (asking.py)."""

    def __init__(self, verdict: FailureVerdict, reason: str) -> None:
        super().__init__(reason)
        self.verdict = verdict
        self.reason = reason


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


@dataclass(eq=False)
class HeldLease:
    lease: Lease
    key: SiteKey
    ttl: float
    expires_at: float
    in_flight: int = 0
    ok_pending: int = 0
    used_since_renewal: bool = False
    #: A page came back through it: until then it carries one request at a time, so a proxy
    #: the site has banned costs one 403, not one per request that joined it meanwhile.
    proven: bool = False
    rest_until: float = 0.0
    gone: bool = False
    renewing: bool = False
    #: The site's pace through this proxy, learned from its 429s (pace.py).
    pace: Pace = UNPACED

    @property
    def host(self) -> str:
        return self.key[0]

    @property
    def proxy_id(self) -> str:
        return self.lease.proxy_id


@dataclass(eq=False)
class Site:
    key: SiteKey
    leases: list[HeldLease] = field(default_factory=list)
    asking: bool = False
    refused_until: float = 0.0
    saturated_until: float = 0.0
    last_refusal: NoLease | None = None
    #: Why the last ask failed, when it is to be asked again (the cause a dropped request gets).
    last_error: str | None = None
    #: Why the API refused this site's requests themselves (a 400 naming their session or target).
    rejected: str | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)


def choose(leases: list[HeldLease], now: float) -> HeldLease | None:
    """The lease a request goes through: the least busy one that is not resting and whose pace
    lets it send now, an unproven one only while it carries nothing. Pure."""
    best: HeldLease | None = None
    for held in leases:
        if held.gone or held.rest_until > now or (not held.proven and held.in_flight > 0):
            continue
        if paces.wait(held.pace, now) > 0:
            continue
        if best is None or held.in_flight < best.in_flight:
            best = held
    return best


def wants_another(leases: list[HeldLease], chosen: HeldLease | None, options: BookOptions, sticky: bool) -> bool:
    """Whether the site asks for one more lease: nothing to use, or the chosen one is as busy as
    a lease should be, and the site is under its cap. Pure."""
    live = sum(1 for held in leases if not held.gone)
    cap = 1 if sticky else options.max_leases_per_site
    if live >= cap:
        return False
    return chosen is None or chosen.in_flight >= options.requests_per_lease


@dataclass
class BookStats:
    leased: int = 0
    renewed: int = 0
    released: int = 0
    reported_ok: int = 0
    reported_banned: int = 0
    reported_rate_limited: int = 0
    reported_unreachable: int = 0
    refused: int = 0


class LeaseBook:
    def __init__(self, api: LeaseApi, options: BookOptions, clock: Callable[[], float]) -> None:
        self.api = api
        self.options = options
        self.clock = clock
        self.sites: dict[SiteKey, Site] = {}
        self.sessions: set[str] = set()
        #: Host -> the latest pace a 429 taught any of its leases, whatever the session: a site
        #: limits each source alike, so a new lease starts from it instead of finding it by a 429.
        self.learned: dict[str, Pace] = {}
        #: Proxy -> when the server answered this crawl's unreachable report (infinite until then).
        self.dead_since: dict[str, float] = {}
        self.stats = BookStats()
        self._tasks: set[asyncio.Task[None]] = set()
        #: The lease asks in flight (a subset of _tasks): cancelled at close.
        self._asks: set[asyncio.Task[None]] = set()
        self._last_ok_flush = clock()
        self._closed = False
        #: Why no ask can succeed (the token or a setting refused): every request fails with it.
        self.stopped: str | None = None
        #: False once the server refused ``exclude`` (an operator older than this client).
        self.exclude_supported = True

    # -- a request's lease ---------------------------------------------------------------------

    async def acquire(self, host: str, session: str | None = None) -> HeldLease:
        """A lease for a request to ``host``; waits (up to max_wait_seconds) when the site has
        none to use. Raises NoLease when none comes: the request never goes without a proxy."""
        key: SiteKey = (host, session)
        site = self.sites.get(key)
        if site is None:
            site = self.sites[key] = Site(key)
        deadline = self.clock() + self.options.max_wait_seconds
        while True:
            if self._closed:
                raise NoLease(409, "all_busy", "the crawl's leases are closed")
            if self.stopped is not None:
                raise LeaseFailed("stop", self.stopped)
            if site.rejected is not None:
                raise LeaseFailed("drop", site.rejected)
            now = self.clock()
            chosen = choose(site.leases, now)
            if wants_another(site.leases, chosen, self.options, session is not None):
                self._ask(site)
            if chosen is not None:
                chosen.pace = paces.reserve(chosen.pace, now).pace
                chosen.in_flight += 1
                chosen.used_since_renewal = True
                return chosen
            refusal = site.last_refusal
            live = [held for held in site.leases if not held.gone]
            for held in live:
                # Demand exceeds each pace that holds this request back: it may climb (pace.py).
                held.pace = paces.waiting(held.pace, now)
            if refusal is not None and refusal.code == "no_match" and not live:
                raise refusal
            if now >= deadline:
                within = f"no lease for {host} within {self.options.max_wait_seconds} s"
                # The real cause, not a made-up all_busy.
                if refusal is None and site.last_error is not None:
                    raise LeaseFailed("retry", f"{within}: {site.last_error}")
                if refusal is None and site.asking and not live:
                    raise LeaseFailed(
                        "retry",
                        f"{within}: the discovery API has not answered the lease ask "
                        "(the client may be waiting out its 503s or 429s)",
                    )
                raise refusal or NoLease(409, "all_busy", f"no lease for {host} within {self.options.max_wait_seconds} s")
            # Wake at the first rest's end, the pace's next request, the next ask, or a change
            # (a lease came, one ended).
            wakes = [max(held.rest_until, now + paces.wait(held.pace, now)) for held in live]
            wakes = [at for at in wakes if at > now]
            wakes.append(max(site.refused_until, now + 0.05))
            timeout = min(min(wakes) - now, deadline - now, 1.0)
            site.changed.clear()
            try:
                await asyncio.wait_for(site.changed.wait(), timeout=max(timeout, 0.01))
            except TimeoutError:
                pass

    def _ask(self, site: Site) -> None:
        live = sum(1 for held in site.leases if not held.gone)
        now = self.clock()
        if not may_ask(
            asking=site.asking,
            live=live,
            now=now,
            refused_until=site.refused_until,
            saturated_until=site.saturated_until,
        ):
            return
        site.asking = True
        self._asks.add(self._spawn(self._lease(site)))

    async def _lease(self, site: Site) -> None:
        host, session = site.key
        asked_at = self.clock()
        # The proxies the site holds are excluded (asking.py): a grant is a new one, a refusal
        # says none other is free for the site.
        excluded = to_exclude(
            (h.proxy_id for h in site.leases if not h.gone), session=session, supported=self.exclude_supported
        )
        try:
            try:
                lease = await self._request_lease(host, session, excluded)
            except DiscoveryApiError as err:
                if not (excluded and refused_field(err, "exclude")):
                    raise
                # An operator older than exclude (its 400 "unknown field(s) 'exclude'"): asked
                # again without it, and every later ask too, as before it (one warning).
                if self.exclude_supported:
                    self.exclude_supported = False
                    log.warning("proxy-operator: the discovery API predates exclude on a lease: asking without it")
                excluded = []
                lease = await self._request_lease(host, session, excluded)
        except NoLease as refusal:
            self.stats.refused += 1
            if after_refusal(refusal.code, excluded) == "covered":
                seconds = covered_for(refusal.code, refusal.retry_after, self.options.saturated_seconds)
                site.saturated_until = self.clock() + seconds
                return
            site.last_refusal, site.last_error = refusal, None
            wait = refusal.retry_after if refusal.code == "all_cooling_down" and refusal.retry_after else 1.0
            site.refused_until = self.clock() + wait
            return
        except Exception as err:  # noqa: BLE001 - every failure is sorted (asking.after_failure)
            failure = after_failure(err)
            if failure.verdict == "stop":
                self.stopped = failure.reason
                for other in self.sites.values():
                    other.changed.set()
            elif failure.verdict == "drop":
                site.rejected = failure.reason
            else:
                log.warning("proxy-operator: lease for %s failed: %s", host, failure.reason)
                site.last_refusal, site.last_error = None, failure.reason
                site.refused_until = self.clock() + 1.0
            return
        finally:
            site.asking = False
            site.changed.set()
        self.stats.leased += 1
        if session is not None:
            self.sessions.add(session)
        site.last_refusal = site.last_error = None
        now = self.clock()
        verdict = after_grant(
            lease.proxy_id,
            (h.proxy_id for h in site.leases if not h.gone),
            closed=self._closed,
            dead_since=self.dead_since.get(lease.proxy_id),
            asked_at=asked_at,
        )
        if verdict != "keep":
            if verdict == "covered":
                site.saturated_until = now + self.options.saturated_seconds
            self._spawn(self._release(lease.lease_id))
            return
        fresh = HeldLease(lease, site.key, float(self.options.ttl_seconds), now + self.options.ttl_seconds)
        learned = self.learned.get(site.key[0])
        if learned is not None:
            fresh.pace = paces.adopt(fresh.pace, learned, now)
        site.leases.append(fresh)
        site.changed.set()

    async def _request_lease(self, host: str, session: str | None, excluded: list[str]) -> Lease:
        selector, ttl = self.options.selector or None, self.options.ttl_seconds
        if excluded:
            return await self.api.lease(
                selector=selector, target=host, session=session, ttl_seconds=ttl, exclude=excluded
            )
        # Without an exclusion, the call older operators know (no exclude field at all).
        return await self.api.lease(selector=selector, target=host, session=session, ttl_seconds=ttl)

    # -- what a response said ------------------------------------------------------------------

    def succeeded(self, held: HeldLease, sent_at: float | None = None) -> None:
        """A success through the lease (the request was given it at ``sent_at`` on this book's
        clock): counted for the next batched ok report, and its pace learns from it."""
        held.in_flight = max(held.in_flight - 1, 0)
        if held.gone:
            return
        held.ok_pending += 1
        held.pace = paces.succeeded(held.pace, self.clock(), sent_at)
        if not held.proven:
            held.proven = True
            self.sites[held.key].changed.set()

    def finished(self, held: HeldLease) -> None:
        """A request through the lease ended with nothing to report (a 404, a timeout)."""
        held.in_flight = max(held.in_flight - 1, 0)
        self.sites[held.key].changed.set()

    async def banned(self, held: HeldLease) -> None:
        """Reported (awaited: the retry must not get the proxy again for this host) and released;
        every other lease of the host on that proxy (other sessions) is released too."""
        held.in_flight = max(held.in_flight - 1, 0)
        if held.gone:
            return
        others = [h for site in self.sites.values() if site.key[0] == held.host for h in site.leases
                  if h.proxy_id == held.proxy_id and h is not held and not h.gone]
        self._drop(held)
        for other in others:
            self._drop(other)
            self._spawn(self._release_held(other))
        self.stats.reported_banned += 1
        await self._report(held, "banned", release=True)

    def rate_limited(self, held: HeldLease, retry_after: float | None, sent_at: float | None = None) -> float:
        """A 429 (``retry_after``: its Retry-After in seconds, None without one) for a request
        given the lease at ``sent_at``: the pace learns from it (pace.py) and the proxy rests for
        this site, reported in the background. A 429 for a request sent before the last one
        taught the pace says nothing new (the server has been told). Returns the rest, seconds."""
        held.in_flight = max(held.in_flight - 1, 0)
        now = self.clock()
        answer = paces.rate_limited(held.pace, now, now if sent_at is None else sent_at, retry_after)
        held.pace = answer.pace
        if held.gone or not answer.teaches:
            return answer.rest
        held.rest_until = max(held.rest_until, now + answer.rest)
        # The host's other leases (every session's) keep the pace this one learned, instead of
        # each finding it by a 429 of its own.
        self.learned[held.host] = held.pace
        for site in self.sites.values():
            if site.key[0] == held.host:
                for other in site.leases:
                    other.pace = paces.adopt(other.pace, held.pace, now)
        self.stats.reported_rate_limited += 1
        seconds = max(math.ceil(answer.rest), 1)
        self._spawn(self._report(held, "rate_limited", retry_after_seconds=seconds))
        return answer.rest

    async def unreachable(self, held: HeldLease) -> None:
        """The proxy itself failed: reported (awaited: the server holds it out of every lease
        until a probe passes), and every lease on it, for every site, is released."""
        held.in_flight = max(held.in_flight - 1, 0)
        if held.gone:
            return  # another request through it has reported it already
        for site in self.sites.values():
            for other in site.leases:
                if other.proxy_id == held.proxy_id and other is not held and not other.gone:
                    self._drop(other)
                    self._spawn(self._release(other.lease.lease_id))
        self._drop(held)
        self.stats.reported_unreachable += 1
        # An ask in flight meanwhile may come back with this proxy: given back (after_grant).
        self.dead_since[held.proxy_id] = math.inf
        await self._report(held, "unreachable", release=True)
        self.dead_since[held.proxy_id] = self.clock()

    # -- time passes ---------------------------------------------------------------------------

    def tick(self) -> None:
        """Once a second: renew or release what is due, send the batched ok reports when due."""
        now = self.clock()
        for site in self.sites.values():
            for held in site.leases:
                if held.gone or held.renewing:
                    continue
                action = renewal_action(now, held.expires_at, held.ttl, held.used_since_renewal or held.in_flight > 0)
                if action == "renew":
                    held.renewing = True
                    self._spawn(self._renew(held))
                elif action == "release":
                    self._drop(held)
                    self._spawn(self._release_held(held))
        if now - self._last_ok_flush >= self.options.ok_report_interval_seconds:
            self._last_ok_flush = now
            self._spawn(self._flush_ok())

    async def _renew(self, held: HeldLease) -> None:
        try:
            await self.api.renew(held.lease.lease_id, int(held.ttl))
            held.expires_at = self.clock() + held.ttl
            held.used_since_renewal = False
            self.stats.renewed += 1
        except DiscoveryApiError as err:
            if err.status == 404:  # expired or released: the site leases again
                self._drop(held)
            else:
                log.warning("proxy-operator: renewing a lease failed: %s", err)
        except Exception as err:  # noqa: BLE001 - retried at the next tick
            log.warning("proxy-operator: renewing a lease failed: %s", err)
        finally:
            held.renewing = False

    async def _flush_ok(self) -> None:
        due = [h for site in self.sites.values() for h in site.leases if not h.gone and h.ok_pending > 0]
        reports = []
        for held in due:
            reports.append(Report(held.lease.lease_id, "ok", held.host))
            held.ok_pending = 0
        await self._send_reports(reports)

    async def _send_reports(self, reports: list[Report]) -> None:
        for start in range(0, len(reports), 100):
            chunk = reports[start : start + 100]
            try:
                await self.api.report_many(chunk)
                self.stats.reported_ok += sum(1 for r in chunk if r.result == "ok")
                self.stats.released += sum(1 for r in chunk if r.release)
            except Exception as err:  # noqa: BLE001 - an ok report lost is a count, not a fault
                log.warning("proxy-operator: %d batched reports failed: %s", len(chunk), err)

    # -- the end -------------------------------------------------------------------------------

    async def close(self) -> None:
        """The last ok reports with the releases (one batched call), the other releases, the
        sessions' ends; waits for every call in the background."""
        self._closed = True
        for site in self.sites.values():
            site.changed.set()
        # An ask waiting out 503s (the client's Retry-After, up to a minute each) would hold the
        # close for minutes, and its lease would go straight back: cancelled. One the server
        # granted before the cancel expires at its TTL.
        for ask in list(self._asks):
            ask.cancel()
        await self._drain()
        held = [h for site in self.sites.values() for h in site.leases if not h.gone]
        for h in held:
            h.gone = True
        await asyncio.gather(
            self._send_reports([Report(h.lease.lease_id, "ok", h.host, release=True) for h in held if h.ok_pending]),
            *(self._release(h.lease.lease_id) for h in held if not h.ok_pending),
            *(self._end_session(key) for key in sorted(self.sessions)),
        )
        await self._drain()

    async def _drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- helpers -------------------------------------------------------------------------------

    def _drop(self, held: HeldLease) -> None:
        held.gone = True
        site = self.sites.get(held.key)
        if site is not None:
            site.leases = [h for h in site.leases if h is not held]
            site.changed.set()

    async def _report(
        self, held: HeldLease, result: ReportResult, *, retry_after_seconds: int | None = None, release: bool = False
    ) -> None:
        try:
            await self.api.report(
                held.lease.lease_id, result, target=held.host, retry_after_seconds=retry_after_seconds, release=release
            )
            if release:
                self.stats.released += 1
        except Exception as err:  # noqa: BLE001 - the request goes on; the lease expires on its own
            log.warning("proxy-operator: reporting %s failed: %s", result, err)

    async def _release_held(self, held: HeldLease) -> None:
        if held.ok_pending:
            held.ok_pending = 0
            await self._send_reports([Report(held.lease.lease_id, "ok", held.host, release=True)])
        else:
            await self._release(held.lease.lease_id)

    async def _release(self, lease_id: str) -> None:
        try:
            await self.api.release(lease_id)
            self.stats.released += 1
        except Exception as err:  # noqa: BLE001 - it expires at its TTL
            log.warning("proxy-operator: releasing a lease failed: %s", err)

    async def _end_session(self, key: str) -> None:
        try:
            await self.api.end_session(key)
        except Exception as err:  # noqa: BLE001
            log.warning("proxy-operator: ending session %s failed: %s", key, err)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(self._asks.discard)
        return task
