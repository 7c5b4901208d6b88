"""Counting round trips to Postgres: a TCP relay in front of the server.

A round trip is the client sending after it last heard from the server:
however many statements a pipeline carries, it is one round trip when the
client sends them all and then waits; a statement whose rows the client waits
for before sending the next one starts another. Counted on the wire, so it
holds for any client (the engine's savers, LangGraph's) without looking inside
the driver. A connection's start-up and authentication are not counted, nor
its closing: a pool opens and closes connections in the background, on its own
schedule, and they are no cost of the statements measured.

The count can only be too high, never too low: a client cannot send what
depends on an answer before the answer came, but the server may answer a
pipeline's first statements while the client is still sending the rest (it
flushes what it has when its input runs dry), and that too reads as the client
sending after hearing from the server. So a measurement is the least count of
a few repeats.

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

__all__ = ("ClientMessages", "RoundTripRelay")

_SETUP = frozenset({b"startup", b"p", b"X"})
"""Client messages of a connection's set-up or end: a start-up packet, a password
(or SASL) answer, Terminate. A send opening with one is not counted."""
_REQUESTS = frozenset({80877103, 80877104, 80877102})
"""Start-up codes of SSLRequest, GSSENCRequest and CancelRequest: untyped packets
after which the real start-up packet (still untyped) may follow."""


class ClientMessages:
    """Follows a client's byte stream message by message (across reads of any
    size), to tell the type of the message a read starts."""

    def __init__(self) -> None:
        self._untyped = True  # start-up packets carry no type byte
        self._head = b""
        self._left = 0

    def opens(self, data: bytes) -> bytes | None:
        """The type of the message ``data`` starts (None: it goes on with one)."""
        if self._left or self._head or not data:
            return None
        return b"startup" if self._untyped else data[:1]

    def feed(self, data: bytes) -> None:
        at = 0
        while at < len(data):
            if self._left:
                step = min(self._left, len(data) - at)
                at += step
                self._left -= step
                continue
            size = 8 if self._untyped else 5
            piece = data[at : at + size - len(self._head)]
            at += len(piece)
            self._head += piece
            if len(self._head) < size:
                continue
            head, self._head = self._head, b""
            if self._untyped:
                length = int.from_bytes(head[:4], "big")
                code = int.from_bytes(head[4:8], "big")
                self._untyped = code in _REQUESTS
                self._left = length - 8
            else:
                self._left = int.from_bytes(head[1:5], "big") - 4


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
            # whether the connection's last bytes came from the client; what it sent
            last = [False]
            sent = ClientMessages()
            for source, sink, from_client in (
                (client, server, True),
                (server, client, False),
            ):
                threading.Thread(
                    target=self._pump,
                    args=(source, sink, from_client, last, sent),
                    daemon=True,
                ).start()

    def _pump(
        self,
        source: socket.socket,
        sink: socket.socket,
        from_client: bool,
        last: list[bool],
        sent: ClientMessages,
    ) -> None:
        while True:
            try:
                data = source.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            with self._lock:
                if from_client:
                    if not last[0] and sent.opens(data) not in _SETUP:
                        self._trips += 1
                    sent.feed(data)
                last[0] = from_client
            try:
                sink.sendall(data)
            except OSError:
                break
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
