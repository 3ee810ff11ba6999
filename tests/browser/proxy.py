"""A loopback TCP proxy whose network a test can cut and restore.

Chromium's offline emulation fails new requests but leaves a streaming response that is
already open untouched, so it cannot cut an answer mid-stream. This proxy sits between
the page and daphne: :meth:`CuttableProxy.cut` resets every open connection (both sides
see the network drop) and refuses new ones until :meth:`CuttableProxy.restore`;
:meth:`CuttableProxy.freeze` drops every byte while connections stay open (a dead link that
says nothing) until :meth:`CuttableProxy.thaw`.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class CuttableProxy:
    """Forward ``127.0.0.1:<port>`` to ``target_port``; cut and restore on demand."""

    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.target_port = target_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.is_cut = False
        self.is_frozen = False
        self.cuts = 0
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def url(self, path: str = "/") -> str:
        """Return the URL of ``path`` through the proxy."""
        return f"http://{self.host}:{self.port}{path}"

    def cut(self) -> None:
        """Reset every open connection and refuse new ones (a network outage)."""
        with self._lock:
            self.is_cut = True
            self.cuts += 1
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            _reset(sock)

    def restore(self) -> None:
        """Accept and forward connections again."""
        with self._lock:
            self.is_cut = False

    def freeze(self) -> None:
        """Black-hole the network: connections stay open, every byte is dropped (no FIN, no RST)."""
        with self._lock:
            self.is_frozen = True

    def thaw(self) -> None:
        """End a freeze: reset the connections that lost bytes in it, forward new ones again."""
        with self._lock:
            self.is_frozen = False
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            _reset(sock)

    def close(self) -> None:
        """Stop listening and reset every connection."""
        self._closed = True
        self.cut()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                refused = self.is_cut
            if refused:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if self.is_frozen:
                    continue  # dropped on the floor, as by a dead link
                target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)


def _reset(sock: socket.socket) -> None:
    # SO_LINGER 0: close with a RST, as a dropped network looks to the peer. shutdown()
    # first: a close() alone does not wake the pump thread blocked in recv() on this socket,
    # and the kernel keeps the connection open until that recv() returns.
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
