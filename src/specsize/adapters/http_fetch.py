"""Fetching a /metrics page: one GET to the URL given, within a deadline for the whole answer.

http.client, not urllib: urllib follows redirects and proxies, and its connection objects outlive the answer, so a
timer meant to cut a stalled server could neither start before the connection nor be cancelled after it. Here one
timer covers the connection, the status line, the headers and the body; it is cancelled whatever happens; and a
server that trickles bytes (each wait under the socket timeout) is cut at the deadline all the same.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import threading
from urllib.parse import urlsplit

from ..core.errors import SpecError


def blocked_address(host: str) -> bool:
    """A link-local (the cloud metadata service at 169.254.169.254), multicast or unspecified address, also in its
    IPv4-mapped IPv6 form: never a serving engine's."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return address.is_link_local or address.is_multicast or address.is_unspecified


def fetch(url: str, deadline_s: float, limit: int) -> bytes:
    """The body of `url` (http or https), at most `limit` + 1 bytes, within `deadline_s` for everything; redirects
    and answers other than 200 are errors, as is a peer at a blocked address. SpecError (field metrics) for any
    failure."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - read here: urlsplit parses the port lazily, and raises on it only when asked
    except ValueError as err:  # "http://[::1" (an unclosed IPv6 bracket) had ended in an internal error (exit 4)
        raise SpecError("metrics", f"cannot read the URL {url!r:.200} ({err})", "a /metrics URL such as "
                        "http://HOST:PORT/metrics, or a file") from None
    late = SpecError("metrics", f"{url} took longer than {deadline_s:g} s to answer",
                     "a /metrics endpoint that answers within the deadline")
    expired = threading.Event()
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = kind(parts.hostname or "", parts.port, timeout=min(10.0, deadline_s))
    except ValueError as err:  # a port that is not a number
        raise SpecError("metrics", f"cannot fetch {url} ({err})", "a reachable /metrics URL or a file") from None

    held: list[socket.socket] = []  # the connection's socket: http.client drops conn.sock once the answer begins

    def cut() -> None:
        expired.set()
        for sock in held or ([conn.sock] if conn.sock is not None else []):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns at once
            except OSError:
                pass

    timer = threading.Timer(deadline_s, cut)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        held.append(conn.sock)
        body = _answer(conn, url, limit)
        if expired.is_set():  # cut mid-body: what arrived is not the whole page
            raise late
        return body
    except SpecError:
        raise
    except Exception as err:  # any network failure is the user's input being unreachable
        if expired.is_set():
            raise late from None
        raise SpecError("metrics", f"cannot fetch {url} ({type(err).__name__}: {err})",
                        "a reachable /metrics URL or a file") from None
    finally:
        timer.cancel()
        conn.close()


def _answer(conn: http.client.HTTPConnection, url: str, limit: int) -> bytes:
    """Check the connected peer's address, GET, and read the body (at most `limit` + 1 bytes); fetch's timer cuts
    the connection at the deadline, whatever this is waiting for."""
    parts = urlsplit(url)
    peer = conn.sock.getpeername()[0] if conn.sock is not None else ""
    if blocked_address(str(peer)):
        raise SpecError("metrics", f"{url} resolves to {peer}, a link-local, multicast or unspecified address",
                        "the address of a vLLM or SGLang server")
    conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                 headers={"Accept-Encoding": "identity"})
    response = conn.getresponse()
    if 300 <= response.status < 400:
        raise SpecError("metrics", f"{url} redirects ({response.status}) to {response.getheader('location')}; "
                        "redirects are not followed", "the /metrics URL of the engine itself")
    if response.status != 200:
        raise SpecError("metrics", f"cannot fetch {url} (HTTP {response.status} {response.reason})",
                        "a reachable /metrics URL or a file")
    chunks: list[bytes] = []
    received = 0
    while received <= limit:
        chunk = response.read1(65536)
        if not chunk:
            break
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)
