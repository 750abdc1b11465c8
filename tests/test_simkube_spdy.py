"""SPDY/3.1 framing and the port-forward session the Kubernetes API emulator serves
``kubectl port-forward`` with, driven here by a client made of the same frames (the real
kubectl drives them in test_simkube_portforward.py)."""

from __future__ import annotations

import queue
import socket
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tpu_trainer.simcloud.kube import spdy
from tpu_trainer.simcloud.kube.portforward import PortForwardSession, refused

pytestmark = pytest.mark.unit


def test_the_header_dictionary_is_spdy3s() -> None:
    # its size and its zlib dictionary id (the Adler-32 a zlib stream names it by)
    assert len(spdy.DICTIONARY) == 1423
    assert zlib.adler32(spdy.DICTIONARY) == 3821447106
    assert spdy.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert spdy.DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")


def test_frames_round_trip_through_one_compression_context_fed_byte_by_byte() -> None:
    writer, reader = spdy.FrameWriter(), spdy.FrameReader()
    frames: list[spdy.Frame] = [
        spdy.SynStream(1, {"streamtype": ["error"], "port": ["8265"], "requestid": ["0"]}),
        spdy.SynStream(3, {"streamtype": ["data"], "port": ["8265"], "requestid": ["0"]}),
        spdy.SynReply(3),
        spdy.Data(3, b"GET / HTTP/1.1\r\n\r\n"),
        spdy.Data(1, b"", fin=True),
        spdy.HeadersFrame(3, {"x": ["a", "b"]}, fin=True),
        spdy.RstStream(3, spdy.CANCEL),
        spdy.Ping(7),
        spdy.GoAway(3),
    ]
    data = b"".join(writer.write(f) for f in frames)
    got: list[spdy.Frame] = []
    for i in range(len(data)):
        got += reader.feed(data[i : i + 1])
    assert got == frames


def test_a_data_frame_is_a_stream_id_flags_length_and_bytes() -> None:
    assert spdy.FrameWriter().write(spdy.Data(5, b"hi", fin=True)) == (
        b"\x00\x00\x00\x05\x01\x00\x00\x02hi"
    )
    ping = spdy.FrameWriter().write(spdy.Ping(1))
    assert ping == struct.pack(">HHII", 0x8003, spdy.PING, 4, 1)


def test_a_header_block_keeps_several_values_and_lowers_names() -> None:
    block = spdy.encode_headers({"StreamType": ["data"], "Accept": ["a", "b"]})
    assert spdy.decode_headers(block) == {"streamtype": ["data"], "accept": ["a", "b"]}


def test_bad_input_is_a_spdy_error() -> None:
    with pytest.raises(spdy.SpdyError, match="version 2"):
        spdy.FrameReader().feed(struct.pack(">HHI", 0x8002, spdy.PING, 4) + b"\x00\x00\x00\x01")
    with pytest.raises(spdy.SpdyError, match="does not decompress"):
        spdy.FrameReader().feed(struct.pack(">HHI", 0x8003, spdy.SYN_REPLY, 6) + b"\0\0\0\1zz")


# ---- the session, with an in-memory connection ---------------------------------------------
@dataclass
class _Pipe:
    """The session's transport; the test plays kubectl on the other end."""

    inbox: queue.Queue[bytes] = field(default_factory=queue.Queue)
    reader: spdy.FrameReader = field(default_factory=spdy.FrameReader)
    frames: queue.Queue[spdy.Frame] = field(default_factory=queue.Queue)
    closed: bool = False

    def read(self) -> bytes:
        return self.inbox.get(timeout=10)

    def write(self, data: bytes) -> None:
        for frame in self.reader.feed(data):
            self.frames.put(frame)

    def close(self) -> None:
        self.closed = True


def _unordered(*frames: spdy.Frame) -> list[str]:
    return sorted(repr(f) for f in frames)


@dataclass
class _Kubectl:
    pipe: _Pipe
    writer: spdy.FrameWriter = field(default_factory=spdy.FrameWriter)

    def send(self, *frames: spdy.Frame) -> None:
        self.pipe.inbox.put(b"".join(self.writer.write(f) for f in frames))

    def next(self) -> spdy.Frame:
        return self.pipe.frames.get(timeout=10)

    def pair(self, request: int, port: int) -> tuple[int, int]:
        """Open the error and data streams of one local connection, as kubectl does."""
        error, data = 4 * request + 1, 4 * request + 3
        headers = {"port": [str(port)], "requestid": [str(request)]}
        self.send(spdy.SynStream(error, {**headers, "streamtype": ["error"]}))
        self.send(spdy.Data(error, b"", fin=True))
        self.send(spdy.SynStream(data, {**headers, "streamtype": ["data"]}))
        assert _unordered(self.next(), self.next()) == _unordered(
            spdy.SynReply(error), spdy.SynReply(data)
        )
        return error, data


@pytest.fixture
def echo() -> Iterator[int]:
    """A listener on 127.0.0.1 that answers each line upper-cased and closes at ``bye``."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while chunk := conn.recv(1024):
                conn.sendall(chunk.upper())
                if b"bye" in chunk:
                    return

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()


@pytest.fixture
def session(echo: int) -> Iterator[_Kubectl]:
    pipe = _Pipe()
    backend = {8265: echo}
    forward = PortForwardSession(pipe, lambda port: backend.get(port) or refused(port, "abc"))
    thread = threading.Thread(target=forward.run, daemon=True)
    thread.start()
    yield _Kubectl(pipe)
    pipe.inbox.put(b"")
    thread.join(timeout=10)
    assert pipe.closed


def test_two_connections_carry_bytes_both_ways_and_end_with_fins(session: _Kubectl) -> None:
    first = session.pair(0, 8265)
    second = session.pair(1, 8265)
    session.send(spdy.Data(second[1], b"two\n"), spdy.Data(first[1], b"one\n"))
    got = _unordered(session.next(), session.next())
    assert got == _unordered(spdy.Data(first[1], b"ONE\n"), spdy.Data(second[1], b"TWO\n"))
    session.send(spdy.Data(first[1], b"bye"))  # the pod's side closes: both streams end
    assert session.next() == spdy.Data(first[1], b"BYE")
    assert [session.next(), session.next()] == [
        spdy.Data(first[1], b"", fin=True),
        spdy.Data(first[0], b"", fin=True),
    ]
    session.send(spdy.Ping(9))
    assert session.next() == spdy.Ping(9)


def test_kubectls_reset_closes_the_pods_side(session: _Kubectl) -> None:
    error, data = session.pair(0, 8265)
    session.send(spdy.RstStream(data, spdy.CANCEL))
    assert session.next() == spdy.Data(error, b"", fin=True)  # no FIN on the reset stream


def test_a_port_nothing_listens_on_gets_the_kubelets_error(session: _Kubectl) -> None:
    error, data = session.pair(0, 9999)
    said = session.next()
    assert isinstance(said, spdy.Data) and said.stream_id == error
    assert said.data.decode().startswith("error forwarding port 9999 to pod abc, uid : ")
    assert b"connect: connection refused" in said.data
    assert _unordered(session.next(), session.next()) == _unordered(
        spdy.Data(data, b"", fin=True), spdy.Data(error, b"", fin=True)
    )


def test_a_stream_without_a_port_is_reset(session: _Kubectl) -> None:
    session.send(spdy.SynStream(1, {"streamtype": ["data"], "requestid": ["0"]}))
    assert session.next() == spdy.RstStream(1, spdy.CANCEL)
    session.send(spdy.SynStream(3, {"streamtype": ["other"], "port": ["1"]}))
    assert session.next() == spdy.RstStream(3, spdy.CANCEL)
