"""A loopback TCP proxy between the faucet and the node that loses submissions on purpose.

Everything passes through both ways, except on a connection that carries
``author_submitExtrinsic``: with ``after`` the request reaches the node, and the connection is
closed as soon as the node's answer arrives, which is never delivered (the submission happened;
the faucet cannot know); with ``before`` the connection is closed before the request is
forwarded (nothing reached the node). ``limit`` submissions are lost, then they pass.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

MARKER = b"author_submitExtrinsic"


@dataclass
class LossyProxy:
    upstream: tuple[str, int]
    mode: str = "pass"  # pass | after | before
    limit: int = 1_000_000
    lost: int = 0
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _conns: list[socket.socket] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _claim(self) -> bool:
        with self._lock:
            if self.mode == "pass" or self.lost >= self.limit:
                return False
            self.lost += 1
            return True

    def serve(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._conns += [client, server]
            state = {"lose": False}
            threading.Thread(target=self._up, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, state),
                             daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, state: dict[str, bool]) -> None:
        tail = b""
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                seen = MARKER in tail + data
                tail = data[-len(MARKER):]
                if seen and not state["lose"] and self._claim():
                    if self.mode == "before":
                        break
                    state["lose"] = True  # forwarded; the answer will be swallowed
                server.sendall(data)
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket,
              state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if state["lose"]:
                    break  # the node answered the submission: the faucet never hears it
                client.sendall(data)
        _close(client, server)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()


@contextlib.contextmanager
def lossy_proxy(upstream_url: str, mode: str = "after",
                limit: int = 1_000_000) -> Iterator[LossyProxy]:
    host_port = upstream_url.split("://", 1)[1].rstrip("/")
    host, port = host_port.rsplit(":", 1)
    assert host == "127.0.0.1", upstream_url
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    proxy = LossyProxy((host, int(port)), mode=mode, limit=limit,
                       port=listener.getsockname()[1])
    thread = threading.Thread(target=proxy.serve, args=(listener,), daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        listener.close()
        with proxy._lock:
            conns = list(proxy._conns)
        _close(*conns)
        thread.join(timeout=5)
