"""Where events may be sent: the policy every webhook URL and EventBridge endpoint passes, at
subscription time and again on every connection (a name can resolve elsewhere later).

- ``https`` only; ``http`` only to a loopback address (a receiver on this machine, for development);
- never a link-local address (169.254.0.0/16 and fe80::/10: cloud metadata services live
  there, e.g. 169.254.169.254 and AWS's fd00:ec2::254, which is refused too), nor the
  unspecified address, nor this murphy server itself (its own port on a local address);
- unless ``Settings.event_target_allowlist`` names the host, the address or a network that
  holds it (``hooks.internal``, ``10.1.2.3``, ``169.254.0.0/16``): then any scheme and address.

Redirects are never followed (the webhook adapter uses ``http.client``, which does not): a 3xx
is a failed attempt.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from typing import TYPE_CHECKING

from murphy.exceptions import ValidationException

if TYPE_CHECKING:
    from murphy.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_METADATA = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"),
             ipaddress.ip_network("fd00:ec2::254/128"))


class TargetRefused(ValidationException):
    """A target URL or address the policy does not allow (a ValidationException on the wire)."""

    @property
    def code(self) -> str:
        return "ValidationException"


def _allowed(host: str, address: IPAddress | None, settings: Settings) -> bool:
    for entry in settings.event_target_allowlist:
        if entry.lower() == host.lower():
            return True
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
    return False


def _plain(address: IPAddress) -> IPAddress:
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def check_address(field: str, url: str, scheme: str, host: str, port: int, raw: str, settings: Settings) -> None:
    """Raise :class:`TargetRefused` if ``url`` may not be reached at address ``raw``."""
    address = _plain(ipaddress.ip_address(raw.split("%", 1)[0]))
    if _allowed(host, address, settings):
        return
    if any(address in net for net in _METADATA):
        raise TargetRefused(f"{field} {url!r} reaches {address}, a link-local (cloud metadata) address: refused "
                            "(allow it with MURPHY_EVENT_TARGET_ALLOWLIST if you mean it)")
    if address.is_unspecified or address.is_multicast:
        raise TargetRefused(f"{field} {url!r} reaches {address}: not a receiver's address")
    local = address.is_loopback or str(address) == settings.host
    if local and port == settings.port:
        raise TargetRefused(f"{field} {url!r} is this murphy server itself: refused")
    if scheme != "https" and not address.is_loopback:
        raise TargetRefused(f"{field} {url!r} must be https:// (http:// is allowed only to a loopback address, "
                            "for development; or list the host in MURPHY_EVENT_TARGET_ALLOWLIST)")


def _parts(url: str) -> tuple[str, str, int]:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    return parts.scheme, host, parts.port or (443 if parts.scheme == "https" else 80)


def check_url(field: str, url: str, settings: Settings, *, resolve: bool = True) -> None:
    """At subscription time: the URL's literal address, or what its name resolves to now (a
    name that does not resolve yet is checked when a delivery connects)."""
    scheme, host, port = _parts(url)
    if _allowed(host, None, settings):
        return
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        check_address(field, url, scheme, host, port, host, settings)
        return
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        check_address(field, url, scheme, host, port, "127.0.0.1", settings)
        return
    if not resolve:
        if scheme != "https":
            raise TargetRefused(f"{field} {url!r} must be https:// (http:// is allowed only to a loopback address)")
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        if scheme != "https":
            raise TargetRefused(f"{field} {url!r} must be https:// (http:// is allowed only to a loopback "
                                "address, for development)") from None
        return
    for info in infos:
        check_address(field, url, scheme, host, port, str(info[4][0]), settings)


def check_peer(url: str, peer: str, settings: Settings) -> None:
    """On every connection: the address actually connected to (DNS may have changed)."""
    scheme, host, port = _parts(url)
    check_address("target", url, scheme, host, port, peer, settings)
