"""The request meta keys the add-on reads or writes (the middleware and the send-time check)."""

from __future__ import annotations

#: The request's lease (a HeldLease), set by the middleware when it gives the request a proxy.
LEASE_KEY = "proxy_operator_lease"
#: When the request was given its lease, on the book's clock (the pace's answer to a 429 needs it).
SENT_KEY = "proxy_operator_sent_at"
RETRIES_KEY = "proxy_operator_retries"
#: How many times the request was sent again because its lease ended before it was sent (reroute.py).
REROUTES_KEY = "proxy_operator_reroutes"
SESSION_KEY = "proxy_operator_session"
#: The download slot the spider set itself (``meta['download_slot']``), kept while the add-on's
#: per-exit slot takes its place (slots.py).
SLOT_KEY = "proxy_operator_slot"
