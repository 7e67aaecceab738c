"""The target of a lease or report: one canonical form, the host name, lower-case, without
scheme, port or path (``shop.example``), so that a URL never splits a site's cooldowns."""

from __future__ import annotations

from urllib.parse import urlsplit


def target_of(url_or_host: str) -> str:
    """The canonical target of a URL (``https://Shop.Example:443/a`` → ``shop.example``) or of a
    host name as it is. Raises ValueError when there is no host in it."""
    text = url_or_host.strip()
    if "://" not in text:
        text = "//" + text
    try:
        host = urlsplit(text).hostname
    except ValueError as err:
        raise ValueError(f"target: {url_or_host!r} is not a URL or host name ({err})") from err
    if not host:
        raise ValueError(f"target: {url_or_host!r} names no host")
    return host.rstrip(".").lower()
