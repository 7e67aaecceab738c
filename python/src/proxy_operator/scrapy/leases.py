"""The crawl's leases: per site (a host name, and a sticky session when a request names one)
a few leases, shared by every request to that site, asked for as the crawl needs them; the
reports that follow each response; renewal, batched ok reports and the release at the end.

No Scrapy here: the middleware translates Scrapy's events into these calls. Every call to the
discovery API is awaited on the event loop (never a blocking call), and the clock is injected.
What the book holds is in lease_state.py, how a site's requests share its leases in sharing.py,
the calls that may fail quietly (reports, releases) in api_calls.py.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Coroutine
from itertools import chain
from typing import Any, TypeVar

from ..errors import DiscoveryApiError, NoLease, refused_field
from ..types import Lease, Report, ReportResult
from . import pace as paces
from .api_calls import ApiCalls, described
from .asking import (
    after_failure,
    after_grant,
    after_refusal,
    covered_for,
    may_ask,
    out_since,
    quota_covers,
    to_exclude,
)
from .book_options import BookOptions
from .lease_api import LeaseApi
from .lease_state import BookStats, HeldLease, LeaseFailed, Site, SiteKey
from .pace import Pace
from .renewal import renewal_action, renewal_timing
from .sharing import choose, wants_another

__all__ = [
    "BookOptions",
    "BookStats",
    "HeldLease",
    "LeaseApi",
    "LeaseBook",
    "LeaseFailed",
    "Site",
    "SiteKey",
    "choose",
    "wants_another",
]

log = logging.getLogger("proxy_operator")

K = TypeVar("K")


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
        #: (host, proxy) -> when the server answered this crawl's ban report (infinite until then).
        self.banned_since: dict[tuple[str, str], float] = {}
        self.stats = BookStats()
        self.calls = ApiCalls(api, self.stats)
        self._tasks: set[asyncio.Task[None]] = set()
        #: The lease asks in flight (a subset of _tasks): cancelled at close.
        self._asks: set[asyncio.Task[None]] = set()
        self._last_ok_flush = clock()
        self._closed = False
        #: Why no ask can succeed (the token or a setting refused): every request fails with it.
        self.stopped: str | None = None
        #: False once the server refused ``exclude`` (an operator older than this client).
        self.exclude_supported = True
        #: The token's lease quota was met (asking.quota_covers): said once.
        self._quota_noted = False

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
        # So are the proxies reported out (banned for the host, unreachable) whose report the
        # server has not taken yet: it could grant them again.
        pending = [p for p, at in self.dead_since.items() if at == math.inf]
        pending += [p for (h, p), at in self.banned_since.items() if h == host and at == math.inf]
        excluded = to_exclude(
            chain((h.proxy_id for h in site.leases if not h.gone), pending),
            session=session,
            supported=self.exclude_supported,
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
            if quota_covers(err, sum(1 for h in site.leases if not h.gone)):
                site.saturated_until = self.clock() + self.options.saturated_seconds
                self.stats.refused += 1
                if not self._quota_noted:  # once a crawl: the token's quota is not a fault
                    self._quota_noted = True
                    log.warning("proxy-operator: %s; %s shares the leases it holds", err, host)
                return
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
            dead_since=out_since(self.dead_since.get(lease.proxy_id), self.banned_since.get((host, lease.proxy_id))),
            asked_at=asked_at,
        )
        if verdict != "keep":
            if verdict == "covered":
                site.saturated_until = now + self.options.saturated_seconds
            self._spawn(self.calls.release(lease.lease_id))
            return
        # The server's TTL runs from when it granted: at the latest from when the ask left.
        fresh = HeldLease(lease, site.key, float(self.options.ttl_seconds), asked_at + self.options.ttl_seconds)
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

    def rerouted(self, held: HeldLease) -> None:
        """A request given the lease was not sent: the lease ended while it waited (send_check.py)."""
        held.in_flight = max(held.in_flight - 1, 0)
        site = self.sites.get(held.key)
        if site is not None:
            site.changed.set()

    def finished(self, held: HeldLease) -> None:
        """A request through the lease ended with nothing to report (a 404, a timeout)."""
        held.in_flight = max(held.in_flight - 1, 0)
        self.sites[held.key].changed.set()

    def banned(self, held: HeldLease) -> None:
        """The site banned the proxy: out of use for this host at once (this lease and every other
        of the host on that proxy, other sessions too, are dropped: a request queued on them is
        re-routed when it comes to be sent), the report and release sent in the background (a
        slow API must not hold the response); until the server has it, the host's asks exclude
        the proxy and a grant of it is given back."""
        held.in_flight = max(held.in_flight - 1, 0)
        if held.gone:
            return
        others = [h for site in self.sites.values() if site.key[0] == held.host for h in site.leases
                  if h.proxy_id == held.proxy_id and h is not held and not h.gone]
        self._drop(held)
        for other in others:
            self._drop(other)
            self._spawn(self.calls.release_held(other))
        self.stats.reported_banned += 1
        key = (held.host, held.proxy_id)
        self.banned_since[key] = math.inf
        self._spawn(self._deliver(held, "banned", self.banned_since, key))

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
        self._spawn(self.calls.report(held, "rate_limited", retry_after_seconds=seconds))
        return answer.rest

    def unreachable(self, held: HeldLease) -> None:
        """The proxy itself failed: every lease on it, for every site, dropped at once and
        released; the report sent in the background (the server then holds the proxy out of every
        lease until a probe passes). Until the server has it, asks exclude the proxy and a grant
        of it is given back."""
        held.in_flight = max(held.in_flight - 1, 0)
        if held.gone:
            return  # another request through it has reported it already
        for site in self.sites.values():
            for other in site.leases:
                if other.proxy_id == held.proxy_id and other is not held and not other.gone:
                    self._drop(other)
                    self._spawn(self.calls.release(other.lease.lease_id))
        self._drop(held)
        self.stats.reported_unreachable += 1
        self.dead_since[held.proxy_id] = math.inf
        self._spawn(self._deliver(held, "unreachable", self.dead_since, held.proxy_id))

    async def _deliver(self, held: HeldLease, result: ReportResult, since: dict[K, float], key: K) -> None:
        """The report sent until heard; then ``since[key]`` says when (infinite until then: a
        report never heard keeps the proxy out of this crawl's asks)."""
        if await self.calls.deliver(held, result):
            since[key] = self.clock()

    # -- time passes ---------------------------------------------------------------------------

    @property
    def tick_seconds(self) -> float:
        """How often tick() is to be called: a second, less for a short TTL (renewal.py)."""
        return renewal_timing(float(self.options.ttl_seconds)).tick

    def tick(self) -> None:
        """Every tick_seconds: renew or release what is due, send the batched ok reports when due."""
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
                    self._spawn(self.calls.release_held(held))
        if now - self._last_ok_flush >= self.options.ok_report_interval_seconds:
            self._last_ok_flush = now
            self._spawn(self._flush_ok())

    async def _renew(self, held: HeldLease) -> None:
        sent = self.clock()
        try:
            await self.api.renew(held.lease.lease_id, int(held.ttl))
            held.expires_at = sent + held.ttl  # from when the renewal left, as for a grant
            held.used_since_renewal = False
            self.stats.renewed += 1
        except DiscoveryApiError as err:
            if err.status == 404:  # expired or released: the site leases again
                self._drop(held)
            else:
                log.warning("proxy-operator: renewing a lease failed: %s", described(err))
        except Exception as err:  # noqa: BLE001 - retried at the next tick
            log.warning("proxy-operator: renewing a lease failed: %s", described(err))
        finally:
            held.renewing = False

    async def _flush_ok(self) -> None:
        due = [h for site in self.sites.values() for h in site.leases if not h.gone and h.ok_pending > 0]
        reports = []
        for held in due:
            reports.append(Report(held.lease.lease_id, "ok", held.host))
            held.ok_pending = 0
        await self.calls.send_reports(reports)

    # -- the end -------------------------------------------------------------------------------

    async def close(self) -> None:
        """The last ok reports with the releases (one batched call), the other releases, the
        sessions' ends. Waits for the calls in the background (ban and unreachable reports
        still being sent, renewals, releases) at most ``close_wait_seconds``, and as long again
        for the last calls: a slow or failing API does not hold the spider's close for minutes
        (a lease not released expires at its TTL)."""
        self._closed = True
        for site in self.sites.values():
            site.changed.set()
        # An ask waiting out 503s (the client's Retry-After, up to a minute each) would hold the
        # close for minutes, and its lease would go straight back: cancelled. One the server
        # granted before the cancel expires at its TTL.
        for ask in list(self._asks):
            ask.cancel()
        await self._drain()
        self._note_unheard()
        held = [h for site in self.sites.values() for h in site.leases if not h.gone]
        for h in held:
            h.gone = True
        self._spawn(self._last_calls(held))
        await self._drain()

    def _note_unheard(self) -> None:
        """The reports that took a proxy out which the server never took (refused, failed every
        try, or given up at close): counted and named, since the server holds nothing against
        those proxies (no cooldown for the site, no probe) and another crawl may be given them."""
        banned = sorted(f"banned {p} for {h}" for (h, p), at in self.banned_since.items() if at == math.inf)
        dead = sorted(f"unreachable {p}" for p, at in self.dead_since.items() if at == math.inf)
        self.stats.unheard_banned, self.stats.unheard_unreachable = len(banned), len(dead)
        if banned or dead:
            log.warning(
                "proxy-operator: the discovery API never took %d report(s) that took a proxy out: %s",
                len(banned) + len(dead),
                ", ".join(banned + dead),
            )

    async def _last_calls(self, held: list[HeldLease]) -> None:
        await asyncio.gather(
            self.calls.send_reports([Report(h.lease.lease_id, "ok", h.host, release=True) for h in held if h.ok_pending]),
            *(self.calls.release(h.lease.lease_id) for h in held if not h.ok_pending),
            *(self.calls.end_session(key) for key in sorted(self.sessions)),
        )

    async def _drain(self) -> None:
        """Waits for the calls in the background, at most close_wait_seconds; then cancels them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.close_wait_seconds
        while self._tasks:
            left = deadline - loop.time()
            if left <= 0:
                pending = list(self._tasks)
                log.warning(
                    "proxy-operator: %d calls to the discovery API (reports, releases) still unanswered after "
                    "%s s at close: given up (their leases expire at their TTL)",
                    len(pending),
                    self.options.close_wait_seconds,
                )
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return
            await asyncio.wait(list(self._tasks), timeout=left)

    # -- helpers -------------------------------------------------------------------------------

    def _drop(self, held: HeldLease) -> None:
        held.gone = True
        site = self.sites.get(held.key)
        if site is not None:
            site.leases = [h for h in site.leases if h is not held]
            # One lease fewer no longer covers what the fleet gives the site: it may ask again
            # (else its requests pile onto the leases left until the saturation ends, 30 s).
            site.saturated_until = 0.0
            site.changed.set()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(self._asks.discard)
        return task
