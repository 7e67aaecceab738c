"""The Scrapy add-on: ``ADDONS = {"proxy_operator.scrapy.Addon": 0}`` and ``PROXY_OPERATOR_URL``."""

from .addon import Addon
from .middleware import ProxyOperatorMiddleware
from .policy import BanPolicy
from .reroute import RerouteMiddleware, ReroutesExhausted
from .send_check import DownloadHandler, LeaseEnded
from .settings import SettingError

__all__ = [
    "Addon",
    "BanPolicy",
    "DownloadHandler",
    "LeaseEnded",
    "ProxyOperatorMiddleware",
    "RerouteMiddleware",
    "ReroutesExhausted",
    "SettingError",
]
