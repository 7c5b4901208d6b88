"""Counting round trips to Postgres: a TCP relay in front of the server.

A round trip is the client sending after it last heard from the server (or
first on its connection): however many statements a pipeline carries, it is one
round trip when the client sends them all and then waits; a statement whose
rows the client waits for before sending the next one starts another. Counted
on the wire, so it holds for any client (the engine's savers, LangGraph's)
without looking inside the driver.

    with RoundTripRelay(dsn) as relay:
        saver = PostgresSaver.from_conn_string(relay.dsn) ...
        relay.reset()
        graph.invoke(...)
        trips = relay.round_trips
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

from psycopg.conninfo import conninfo_to_dict, make_conninfo

__all__ = ("RoundTripRelay",)


class RoundTripRelay:
    """A relay on a free loopback port forwarding to the server of ``dsn``.

    ``dsn`` (the relay's) is ``dsn`` with host and port replaced; TLS is turned
    off on it so the relay sees plain protocol bytes (it only counts them).
    Each connection is relayed by two threads, one per direction.
    """

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        self._target = (
            str(params.get("host") or "127.0.0.1"),
            int(params.get("port") or 5432),
        )
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._listener.getsockname()[1]
        self.dsn = make_conninfo(dsn, host="127.0.0.1", port=port, sslmode="disable")
        self._lock = threading.Lock()
        self._trips = 0
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(
            target=self._accept, name="pg-round-trip-relay", daemon=True
        ).start()

    @property
    def round_trips(self) -> int:
        with self._lock:
            return self._trips

    def reset(self) -> None:
        with self._lock:
            self._trips = 0

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        for sock in (self._listener, *sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __enter__(self) -> RoundTripRelay:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the relay's threads --------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._target)
            except OSError:
                return
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            last = [False]  # whether the connection's last bytes came from the client
            for source, sink, from_client in (
                (client, server, True),
                (server, client, False),
            ):
                threading.Thread(
                    target=self._pump,
                    args=(source, sink, from_client, last),
                    daemon=True,
                ).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        from_client: bool,
        last: list[bool],
    ) -> None:
        while True:
            try:
                data = source.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            with self._lock:
                if from_client and not last[0]:
                    self._trips += 1
                last[0] = from_client
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
