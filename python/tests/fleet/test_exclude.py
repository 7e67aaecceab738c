"""The client's ``exclude`` against the real discovery API: a grant skips the excluded proxies
even when they are the least used, every match excluded is ``409 all_busy``, and a bad value is
refused by the client and by the server alike, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from fleet_env import PROXIES, Fleet

from proxy_operator import DiscoveryClient, Lease, NoLease

TARGET = "py-exclude.example"


def test_a_grant_skips_the_excluded_proxies_and_every_one_excluded_is_all_busy(fleet: Fleet) -> None:
    with DiscoveryClient(fleet.url, token=fleet.token) as client:
        leases: list[Lease] = []
        try:
            # p0 and p1 excluded: after two grants (p2, p3) they are the least used, and still
            # the third goes to p2 or p3.
            for _ in range(3):
                leases.append(client.lease(target=TARGET, exclude=PROXIES[:2], ttl_seconds=60))
            assert {lease.proxy_id for lease in leases} == set(PROXIES[2:])
            # Asked without exclude, the least used one comes: p0 or p1.
            leases.append(client.lease(target=TARGET, ttl_seconds=60))
            assert leases[-1].proxy_id in PROXIES[:2]
            # Every proxy excluded, though each has free slots: nothing to give.
            with pytest.raises(NoLease) as refused:
                client.lease(target=TARGET, exclude=PROXIES)
            assert refused.value.code == "all_busy"
        finally:
            for lease in leases:
                client.release(lease.lease_id)


@pytest.mark.parametrize(
    ("exclude", "session", "says"),
    [
        ([f"fleet/x{i}" for i in range(101)], None, "at most 100"),
        (["fleet/p0"], "py-exclude-session", "does not go with session"),
        (["fleet/p0", "not-an-id"], None, "exclude[1] must be a proxy id"),
    ],
)
def test_a_bad_exclude_is_refused_by_the_client_and_the_server_naming_it(
    fleet: Fleet, exclude: list[str], session: str | None, says: str
) -> None:
    with DiscoveryClient(fleet.url, token=fleet.token) as client:
        with pytest.raises(ValueError) as local:
            client.lease(target=TARGET, exclude=exclude, session=session)
        assert str(local.value).startswith("exclude") and says in str(local.value)
        # The same body sent as it is: the server's 400 names the field too, and leases nothing.
        body: dict[str, Any] = {"target": TARGET, "exclude": exclude}
        if session is not None:
            body["session"] = session
        answer = client._http.post("/v1/leases", json=body)
        assert answer.status_code == 400
        assert answer.json()["error"] == "invalid_request"
        assert "exclude" in answer.json()["message"] and says in answer.json()["message"]
