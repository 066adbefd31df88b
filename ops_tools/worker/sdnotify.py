"""systemd's notify protocol (sd_notify(3)): one datagram to ``$NOTIFY_SOCKET``.

Under a ``Type=notify`` unit with ``WatchdogSec`` the worker says READY=1 once it serves and
WATCHDOG=1 every liveness tick; elsewhere (supervisor, a terminal) there is no socket and
nothing is sent.
"""

from __future__ import annotations

import os
import socket


def notify(message: str) -> bool:
    """Send ``message`` (e.g. ``READY=1``); False when not run by systemd or the send failed."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True
