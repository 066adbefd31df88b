"""A real TCP proxy on loopback between a service and a development node's RPC port, that can
misbehave as a network or a node does: drop the connection on the first
``author_submitExtrinsic`` (after forwarding it, or before), or hang (accept and never answer,
on new connections and kept-alive ones alike)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class TcpProxy:
    def __init__(self, target: tuple[str, int], *, drop_submit: str | None = None) -> None:
        assert drop_submit in (None, "after", "before")
        self.target, self.drop_submit = target, drop_submit
        self.dropped = 0
        self.hang = threading.Event()  # set: nothing is forwarded either way
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _wait_while_hung(self) -> None:
        while self.hang.is_set() and not self._stop.is_set():
            time.sleep(0.05)

    def _drop_now(self, data: bytes) -> bool:
        if self.drop_submit is None or b"author_submitExtrinsic" not in data:
            return False
        with self._lock:
            if self.dropped:
                return False
            self.dropped += 1
            return True

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target, timeout=30)

        def back() -> None:
            with contextlib.suppress(OSError):
                while data := upstream.recv(65536):
                    self._wait_while_hung()
                    client.sendall(data)

        threading.Thread(target=back, daemon=True).start()
        try:
            while data := client.recv(65536):
                self._wait_while_hung()
                if self._drop_now(data):
                    if self.drop_submit == "after":
                        upstream.sendall(data)
                        time.sleep(0.2)  # the node has it before the line goes dead
                    break
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._stop.set()
        self.hang.clear()
        self.listener.close()
        self._thread.join(timeout=5)
