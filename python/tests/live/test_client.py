"""Both clients against the real discovery API: every call, and the errors a caller meets."""

from __future__ import annotations

import asyncio

import pytest

from proxy_operator import AsyncDiscoveryClient, DiscoveryApiError, DiscoveryClient, NoLease, Report


def test_the_sync_client_leases_reports_renews_and_releases(api: tuple[str, str]) -> None:
    url, token = api
    with DiscoveryClient(url, token=token) as client:
        lease = client.lease(target="shop.example", session="py-sync", ttl_seconds=60)
        assert lease.proxy_id == "demo/p0"
        assert lease.proxy_url.startswith("http://")
        assert lease.target == "shop.example" and lease.session == "py-sync"
        assert client.report(lease.lease_id, "ok", target="shop.example")["result"] == "ok"
        assert client.renew(lease.lease_id, ttl_seconds=90).lease_id == lease.lease_id
        [answer] = client.report_many([Report(lease.lease_id, "ok", "shop.example", release=True)])
        assert answer["released"] is True
        client.release(lease.lease_id)  # idempotent
        client.end_session("py-sync")
        with pytest.raises(DiscoveryApiError) as gone:
            client.renew(lease.lease_id)
        assert (gone.value.status, gone.value.code) == (404, "lease_not_found")


def test_the_async_client_does_the_same_on_an_event_loop(api: tuple[str, str]) -> None:
    url, token = api

    async def crawl() -> None:
        client = AsyncDiscoveryClient(url, token=token)
        try:
            lease = await client.lease(target="shop.example", ttl_seconds=60)
            report = await client.report(lease.lease_id, "rate_limited", target="shop.example", retry_after_seconds=1)
            assert report["result"] == "rate_limited"
            # The only proxy rests for shop.example now: 409 all_cooling_down, with Retry-After.
            with pytest.raises(NoLease) as refused:
                await client.lease(target="shop.example")
            assert refused.value.code == "all_cooling_down"
            assert refused.value.retry_after is not None and refused.value.retry_after >= 1
            await client.release(lease.lease_id)
        finally:
            await client.aclose()

    asyncio.run(crawl())


def test_a_wrong_token_is_a_401_not_a_silent_success(api: tuple[str, str]) -> None:
    url, _ = api
    with DiscoveryClient(url, token="wrong") as client, pytest.raises(DiscoveryApiError) as err:
        client.lease(target="shop.example")
    assert (err.value.status, err.value.code) == (401, "unauthorized")


def test_nothing_matching_is_a_409_no_match(api: tuple[str, str]) -> None:
    url, token = api
    with DiscoveryClient(url, token=token) as client, pytest.raises(NoLease) as err:
        client.lease(selector={"geo": "nowhere"})
    assert err.value.code == "no_match"


def test_a_bad_field_is_a_400_naming_it(api: tuple[str, str]) -> None:
    url, token = api
    with DiscoveryClient(url, token=token) as client, pytest.raises(DiscoveryApiError) as err:
        client.lease(ttl_seconds=-5)
    assert err.value.status == 400 and "ttlSeconds" in err.value.message


def test_a_write_repeated_with_its_request_id_is_applied_once(api: tuple[str, str]) -> None:
    url, token = api
    with DiscoveryClient(url, token=token) as client:
        lease = client.lease(target="py-idem.example", ttl_seconds=60, request_id="py-lease-1")
        # A retry of a call whose answer was lost: the first lease again, not a second one.
        assert client.lease(target="py-idem.example", ttl_seconds=60, request_id="py-lease-1").lease_id == lease.lease_id
        first = client.report(lease.lease_id, "banned", request_id="py-ban-1")
        assert client.report(lease.lease_id, "banned", request_id="py-ban-1") == first
        proxy = client._http.get(f"/v1/proxies/{lease.proxy_id}").json()
        assert proxy["activeLeases"] == 1 and proxy["stats"]["banned"] == 1
        with pytest.raises(DiscoveryApiError) as bad:
            client.renew(lease.lease_id, request_id="not an id")
        assert bad.value.status == 400 and "Idempotency-Key" in bad.value.message
        client.release(lease.lease_id, request_id="py-release-1")
