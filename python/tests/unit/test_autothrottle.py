"""A 429's rest with Scrapy's AutoThrottle on (AUTOTHROTTLE_ENABLED), on real Scrapy parts: the
Downloader's slots and queue, the AutoThrottle extension the crawler built (its
response_downloaded handler), the add-on's middleware and send check, and a site whose answers
the test gives one by one. AutoThrottle rewrites a slot's ``delay`` on every response; the rest
is a floor on the slot's clock instead, and AutoThrottle's own delay is left as it set it.

Before: the rest was the slot's delay, so a 200 still in flight during a 1 s rest made it 0.51 s
(AutoThrottle goes halfway to its target) and the next request went 0.51 s after the 429; a slot
whose transfers were full sent its next request 0.3 ms after the 429 (Scrapy's downloader looks
at the slot's queue before the middlewares see the answer); and each rest's end gave the slot
the delay it had before its first rest, overwriting AutoThrottle's."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request, signals
from scrapy.core.downloader import Downloader
from scrapy.extensions.throttle import AutoThrottle
from scrapy.http import HtmlResponse
from scrapy.utils.defer import maybe_deferred_to_future

from addon_fixtures import FakeApi, crawler_with
from proxy_operator import Lease
from proxy_operator.scrapy import DownloadHandler, ProxyOperatorMiddleware
from proxy_operator.scrapy.lease_state import HeldLease
from proxy_operator.scrapy.meta_keys import LEASE_KEY
from proxy_operator.scrapy.pace import Pace
from proxy_operator.scrapy.send_turn import SendTurn, send_turn
from proxy_operator.scrapy.slot_timing import REST_DELAY, SlotClock, rested, resting

RETRY_AFTER = 1.0
#: What every answer says it took (AutoThrottle's target delay is this over its target concurrency).
LATENCY = 0.05


@pytest.mark.parametrize(
    ("slot", "now", "seconds", "after"),
    [
        # Nothing before the rest's end, and the slot's own delay after it (AutoThrottle's).
        (SlotClock(99.0, 0.3), 100.0, 1.0, SlotClock(101.0, 0.3)),
        # A slot without a delay gets the least for the rest (Scrapy ignores lastseen at 0).
        (SlotClock(99.0, 0.0), 100.0, 1.0, SlotClock(101.0, REST_DELAY)),
        # A longer rest already in force stands.
        (SlotClock(105.0, 0.3), 100.0, 1.0, SlotClock(105.0, 0.3)),
        (SlotClock(99.0, 0.3), 100.0, -1.0, SlotClock(100.0, 0.3)),  # never before now
    ],
)
def test_a_rest_is_a_floor_on_the_slots_clock(slot: SlotClock, now: float, seconds: float, after: SlotClock) -> None:
    assert resting(slot, now, seconds) == after


@pytest.mark.parametrize(
    ("slot", "now", "delay"),
    [
        (SlotClock(101.0, REST_DELAY), 101.0, 0.0),  # the rest gave it REST_DELAY: back to none
        (SlotClock(105.0, REST_DELAY), 101.0, None),  # a later 429 moved the end: not yet
        (SlotClock(101.0, 0.3), 101.0, None),  # its own delay (or one set since): left alone
    ],
)
def test_after_a_rest_only_the_delay_the_rest_gave_goes_back(slot: SlotClock, now: float, delay: float | None) -> None:
    assert rested(slot, now) == delay


class Site:
    """Answers each request when the test says (``answer``), or at once once ``auto`` is set;
    notes when each was sent (handed to it by the add-on's send check)."""

    sent: dict[str, float] = {}
    #: The slot's delay when each request was sent.
    delays: dict[str, float] = {}
    slots: dict[str, Any] = {}
    pending: dict[str, asyncio.Future[tuple[int, dict[str, str]]]] = {}
    auto = False
    lazy = False

    def __init__(self, crawler: object) -> None:
        pass

    @classmethod
    def from_crawler(cls, crawler: object) -> Site:
        return cls(crawler)

    @classmethod
    def reset(cls) -> None:
        cls.sent, cls.delays, cls.pending, cls.auto = {}, {}, {}, False

    @classmethod
    def answer(cls, path: str, status: int, headers: dict[str, str] | None = None) -> None:
        cls.pending[path].set_result((status, headers or {}))

    async def download_request(self, request: Request) -> HtmlResponse:
        path = request.url.rsplit("/", 1)[1]
        Site.sent[path] = time.monotonic()
        Site.delays[path] = Site.slots[request.meta["download_slot"]].delay
        status, headers = 200, dict[str, str]()
        if not Site.auto:
            Site.pending[path] = asyncio.get_running_loop().create_future()
            status, headers = await Site.pending[path]
        request.meta["download_latency"] = LATENCY
        return HtmlResponse(request.url, status=status, body=b"ok", headers=headers, request=request)

    async def close(self) -> None:
        pass


async def until(check: Any) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


async def crawl(per_slot: int, quiet: float, autothrottle: bool = True) -> dict[str, Any]:
    """``w`` proves the lease; ``a`` meets the 429 (Retry-After: 1) while ``b`` is still in
    flight, ``quiet`` seconds after ``b`` was sent, and then ``b`` comes back 200; ``c`` and
    ``d`` wait in the slot (sent afterwards, answered at once)."""
    Site.reset()
    crawler = crawler_with(
        FakeApi,
        AUTOTHROTTLE_ENABLED=autothrottle,
        AUTOTHROTTLE_START_DELAY=0.2,
        AUTOTHROTTLE_TARGET_CONCURRENCY=4.0,
        CONCURRENT_REQUESTS_PER_DOMAIN=per_slot,
        PROXY_OPERATOR_MAX_LEASES_PER_SITE=1,
        PROXY_OPERATOR_REQUESTS_PER_LEASE=10,
        PROXY_OPERATOR_DOWNLOAD_HANDLERS={"http": Site, "https": Site},
    )
    downloader = Downloader(crawler)
    Site.slots = downloader.slots
    crawler.engine = SimpleNamespace(downloader=downloader)  # what the add-on and AutoThrottle look at
    for throttle in crawler.extensions.middlewares:
        if isinstance(throttle, AutoThrottle):
            throttle._spider_opened(crawler.spider)
    addon = next(m for m in downloader.middleware.middlewares if isinstance(m, ProxyOperatorMiddleware))
    await addon.spider_opened()

    def fetch(path: str) -> asyncio.Future[Any]:
        return asyncio.ensure_future(maybe_deferred_to_future(downloader.fetch(Request(f"http://shop.example/{path}"))))

    try:
        w = fetch("w")
        await until(lambda: "w" in Site.pending)
        Site.answer("w", 200)
        await w
        fetches = [fetch(p) for p in "ab"]
        await until(lambda: "b" in Site.pending)
        (slot,) = downloader.slots.values()
        fetches += [fetch(p) for p in "cd"]
        await until(lambda: len(slot.queue) == 2)
        await asyncio.sleep(quiet)
        limited_at = time.monotonic()
        Site.answer("a", 429, {"Retry-After": str(int(RETRY_AFTER))})
        await until(lambda: fetches[0].done())
        Site.answer("b", 200)
        await until(lambda: fetches[1].done())
        throttled = slot.delay  # AutoThrottle's, after b's answer
        Site.auto = True
        for path, answer in Site.pending.items():
            if not answer.done():  # sent while the site was held (before the fix: c, at the 429)
                Site.answer(path, 200)
        await asyncio.wait_for(asyncio.gather(*fetches[2:]), timeout=10)
        first = min("cd", key=lambda p: Site.sent[p])
        await asyncio.sleep(0.1)
        return {
            "delay_at_end": slot.delay,
            "next_after_429": Site.sent[first] - limited_at,
            "delay_set_by_autothrottle": throttled,
            "delay_after_rest": Site.delays[first],
            "retry": fetches[0].result(),
        }
    finally:
        await addon.spider_closed()
        downloader.close()


@pytest.mark.parametrize(
    ("per_slot", "quiet"),
    [
        # Room in the slot: its timer is pending when the 429 comes, and b's 200 lowers the delay.
        (4, 0.0),
        # The slot's transfers full (a, b) for longer than its delay: the 429 frees one, and
        # Scrapy sends c from its queue before the middlewares see the 429.
        (2, 0.4),
    ],
)
def test_with_autothrottle_no_request_goes_before_the_retry_after_and_its_delay_stays_its_own(
    per_slot: int, quiet: float
) -> None:
    seen = asyncio.run(crawl(per_slot, quiet))
    assert isinstance(seen["retry"], Request)  # the 429's request is retried through another lease
    # The slot's next request: not before the site's Retry-After, whatever AutoThrottle set.
    assert seen["next_after_429"] >= RETRY_AFTER, seen
    # The rest changes nothing AutoThrottle keeps: its delay is there after the rest as it set it.
    assert seen["delay_after_rest"] == pytest.approx(seen["delay_set_by_autothrottle"]), seen


def test_after_each_rest_the_slot_keeps_autothrottles_delay_a_second_rest_too() -> None:
    """AutoThrottle's handler and the add-on's middleware on each answer, as Scrapy calls them:
    a fast 200, a 429, a slow 200 (AutoThrottle raises the delay), another 429. Before, each
    rest's end gave the slot the delay it had before its first rest (0.106 s over AutoThrottle's
    0.5 s here: requests five times closer than AutoThrottle set until it caught up again)."""
    crawler = crawler_with(
        FakeApi,
        AUTOTHROTTLE_ENABLED=True,
        AUTOTHROTTLE_START_DELAY=0.2,
        AUTOTHROTTLE_TARGET_CONCURRENCY=4.0,
        PROXY_OPERATOR_MAX_LEASES_PER_SITE=1,
    )
    downloader = Downloader(crawler)
    crawler.engine = SimpleNamespace(downloader=downloader)
    throttle = next(e for e in crawler.extensions.middlewares if isinstance(e, AutoThrottle))
    throttle._spider_opened(crawler.spider)
    addon = next(m for m in downloader.middleware.middlewares if isinstance(m, ProxyOperatorMiddleware))

    async def answer(status: int, latency: float) -> tuple[float, float]:
        request = Request("http://shop.example/p", dont_filter=True)
        await addon.process_request(request)
        _, slot = downloader._get_slot(request)
        request.meta["download_latency"] = latency
        headers = {"Retry-After": str(int(RETRY_AFTER))} if status == 429 else {}
        response = HtmlResponse(request.url, status=status, body=b"ok", headers=headers, request=request)
        crawler.signals.send_catch_log(signals.response_downloaded, response=response, request=request, spider=crawler.spider)
        await addon.process_response(request, response)
        if status == 429:
            await asyncio.sleep(RETRY_AFTER + 0.05)  # the rest is over
        return slot.delay, slot.jitter

    async def run() -> list[tuple[float, float]]:
        await addon.spider_opened()
        try:
            return [await answer(200, LATENCY), await answer(429, LATENCY), await answer(200, 2.0), await answer(429, LATENCY)]
        finally:
            await addon.spider_closed()
            downloader.close()

    fast, after_first, slow, after_second = asyncio.run(run())
    assert slow[0] > fast[0]  # AutoThrottle raised the delay for the slow answer
    assert after_first == fast  # its 429 changed nothing AutoThrottle keeps (a 429 only raises it)
    assert after_second == slow


def test_without_a_delay_the_rest_holds_too_and_the_slot_has_none_after_it() -> None:
    # No AutoThrottle, DOWNLOAD_DELAY 0 (Scrapy's default): Scrapy looks at a slot's clock only
    # when its delay is above 0, so the rest gives it REST_DELAY, and takes it back at its end.
    seen = asyncio.run(crawl(2, 0.0, autothrottle=False))
    assert seen["next_after_429"] >= RETRY_AFTER, seen
    assert seen["delay_at_end"] == 0.0, seen


@pytest.mark.parametrize(
    ("next_send", "rest_until", "rate", "now", "turn"),
    [
        (0.0, 0.0, None, 100.0, SendTurn(100.0, 0.0)),  # unpaced: at once
        (0.0, 101.0, None, 100.0, SendTurn(101.0, 0.0)),  # never within a rest
        (0.0, 0.0, 4.0, 100.0, SendTurn(100.0, 100.25)),  # the lease's first turn: at once
        (100.25, 0.0, 4.0, 100.1, SendTurn(100.25, 100.5)),  # one interval after the last
        (100.25, 102.0, 4.0, 100.1, SendTurn(102.0, 102.25)),  # after the rest
        (100.25, 0.0, 4.0, 103.0, SendTurn(103.0, 103.25)),  # a quiet lease: at once
    ],
)
def test_a_request_leaves_on_its_leases_turn(
    next_send: float, rest_until: float, rate: float | None, now: float, turn: SendTurn
) -> None:
    assert send_turn(next_send, rest_until, rate, now) == turn


PACE = 4.0


async def paced_crawl() -> list[float]:
    """A lease paced at PACE a second (as after a 429); AutoThrottle starts at a 1 s delay, so
    the requests given the lease at the pace gather in its slot, then its answers come at once
    and AutoThrottle lowers its delay. The gaps between the requests the site got."""
    Site.reset()
    Site.auto = True
    crawler = crawler_with(
        FakeApi,
        AUTOTHROTTLE_ENABLED=True,
        AUTOTHROTTLE_START_DELAY=1.0,
        PROXY_OPERATOR_MAX_LEASES_PER_SITE=1,
        PROXY_OPERATOR_REQUESTS_PER_LEASE=100,
        PROXY_OPERATOR_DOWNLOAD_HANDLERS={"http": Site, "https": Site},
    )
    downloader = Downloader(crawler)
    Site.slots = downloader.slots
    crawler.engine = SimpleNamespace(downloader=downloader)
    next(e for e in crawler.extensions.middlewares if isinstance(e, AutoThrottle))._spider_opened(crawler.spider)
    addon = next(m for m in downloader.middleware.middlewares if isinstance(m, ProxyOperatorMiddleware))
    await addon.spider_opened()

    def fetch(path: str) -> asyncio.Future[Any]:
        return asyncio.ensure_future(maybe_deferred_to_future(downloader.fetch(Request(f"http://shop.example/{path}"))))

    try:
        await fetch("w")  # proves the lease
        assert addon.book is not None
        (held,) = addon.book.sites[("shop.example", None)].leases
        now = addon.book.clock()
        # Its ceiling PACE and a minute's period: the pace neither climbs nor probes here.
        held.pace = Pace(rate=PACE, ceiling=PACE, period=60.0, due=now, limited_at=now, raised_at=now, probed_at=now)
        await asyncio.wait_for(asyncio.gather(*[fetch(str(i)) for i in range(8)]), timeout=20)
        times = sorted(at for path, at in Site.sent.items() if path != "w")
        return [b - a for a, b in zip(times, times[1:])]
    finally:
        await addon.spider_closed()
        downloader.close()


def test_with_autothrottle_a_paced_lease_sends_no_faster_than_its_pace() -> None:
    # Before: 0.06 s apart, four times the pace (the slot sent what gathered behind
    # AutoThrottle's delay at AutoThrottle's lowered one). Each request leaves on its turn, one
    # interval after the last one's; the gap after a request the event loop woke late for is
    # that much shorter (a busy machine: up to 50 ms allowed, a fifth of the interval).
    gaps = asyncio.run(paced_crawl())
    assert min(gaps) >= 1 / PACE - 0.05, [round(g, 3) for g in gaps]


def test_a_request_waiting_for_its_turn_when_a_429_rests_the_lease_waits_out_the_rest() -> None:
    # The add-on's download handler on its own: b waits for its turn (1/s) when a 429 through
    # the lease rests it 1 s; b leaves after the rest, not on the turn it had.
    handler = DownloadHandler(crawler_with(FakeApi, PROXY_OPERATOR_DOWNLOAD_HANDLERS={"http": Site, "https": Site}))
    lease = Lease("l1", "demo/p0", "http://p0.invalid:3128", "2099-01-01T00:00:00Z", "shop.example")
    held = HeldLease(lease, ("shop.example", None), 120.0, float("inf"), pace=Pace(rate=1.0, ceiling=1.0))

    async def run() -> tuple[float, float]:
        Site.reset()
        Site.auto = True
        Site.slots = {"s": SimpleNamespace(delay=0.0)}
        a, b = (Request(f"http://shop.example/{p}", meta={LEASE_KEY: held, "download_slot": "s"}) for p in "ab")
        await handler.download_request(a)
        sending = asyncio.ensure_future(handler.download_request(b))
        await asyncio.sleep(0.2)
        held.rest_until = time.monotonic() + RETRY_AFTER  # a 429 through the lease
        rest_until = held.rest_until
        await sending
        return Site.sent["b"], rest_until

    sent, rest_until = asyncio.run(run())
    assert sent >= rest_until
