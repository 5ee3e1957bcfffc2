"""Where a cluster worker listens: only where its scheduler can reach it.

A Dask worker runs whatever its scheduler's clients send, so it listens on one address, never on
every interface: the one given (``--listen``), else the local address that the route to the
scheduler leaves from (``127.0.0.1`` for a scheduler on this machine). A worker on plain TCP that
listens on an address other machines can reach says so in one warning line.
"""

from __future__ import annotations

import ipaddress
import socket

from ..diagnostics import warn
from .connection import check_address, import_distributed

__all__ = ["exposure", "listen_address", "warn_if_exposed"]

#: schemes whose connections are encrypted and authenticated (with TLS settings)
_SECURE = ("tls", "wss")


def _scheduler_host(scheduler: str) -> tuple[str, str, int]:
    """The scheme, host and port of a scheduler address (``tcp://10.0.0.1:8786``)."""
    check_address(scheduler)
    addressing = import_distributed().comm.addressing
    scheme, location = addressing.parse_address(scheduler)
    try:
        host, port = addressing.parse_host_port(location, 8786)
    except ValueError:
        raise ValueError(f"not a Dask scheduler address with a host: {scheduler!r}") from None
    return str(scheme), str(host), int(port)


def listen_address(scheduler: str, listen: str | None = None) -> str:
    """The address a worker of ``scheduler`` listens on: ``listen`` if given, else the local
    address from which this machine reaches the scheduler's host (a UDP socket's ``connect``
    picks the route and sends nothing), so a scheduler on this machine gives a loopback address.
    A host that cannot be resolved or reached is a one-line ``ValueError``."""
    if listen:
        return listen
    _, host, port = _scheduler_host(scheduler)
    fix = "name the address to listen on with --listen ADDRESS"
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except socket.gaierror as e:
        raise ValueError(f"cannot resolve the scheduler's host {host!r} ({e.strerror}): {fix}") from None
    why = "no address"
    for family, kind, proto, _, where in found:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.connect(where)
                return str(probe.getsockname()[0])
        except OSError as e:
            why = e.strerror or str(e)
    raise ValueError(f"no route from this machine to the scheduler's host {host} ({why}): {fix}")


def _loopback(address: str) -> bool:
    """Whether every address ``address`` (an IP or a host name) stands for is a loopback one."""
    try:
        found = {str(info[4][0]) for info in socket.getaddrinfo(address, None)}
    except socket.gaierror:
        return False
    return bool(found) and all(ipaddress.ip_address(ip.split("%")[0]).is_loopback for ip in found)


def exposure(scheduler: str, address: str) -> str | None:
    """The warning for a worker of ``scheduler`` listening on ``address``: None when it listens on
    loopback only or talks TLS; else one line saying who can run code in it and what to do."""
    scheme = _scheduler_host(scheduler)[0]
    if scheme in _SECURE or _loopback(address):
        return None
    return (
        f"this worker listens on {address} over plain TCP: anyone who can reach that address can run "
        "code in it; use TLS (a tls:// scheduler with --tls-ca-file, --tls-cert, --tls-key: see the "
        "README's TLS section) or a network only you reach"
    )


def warn_if_exposed(scheduler: str, address: str) -> None:
    """Issue :func:`exposure`'s warning, if any, as one ``autosched: warning:`` line."""
    message = exposure(scheduler, address)
    if message is not None:
        warn(message, stacklevel=3)
