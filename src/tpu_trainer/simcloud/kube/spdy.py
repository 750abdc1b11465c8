"""SPDY/3.1 framing, as Kubernetes' streaming connections (``kubectl port-forward``) speak it.

A connection carries frames of two kinds. A data frame is a 31-bit stream id, 8 flag bits
(``FIN``: the sender's last frame on the stream), a 24-bit length and the bytes. A control
frame starts with the control bit and version 3, its type, flags and length; the kinds a
streaming connection uses are SYN_STREAM (a new stream and its headers), SYN_REPLY (the
stream accepted), RST_STREAM, SETTINGS, PING (echoed by the other side), GOAWAY, HEADERS and
WINDOW_UPDATE. Header blocks (a count, then length-prefixed names and values, several values
of one name joined by NUL) are compressed with zlib over the protocol's fixed dictionary, one
compression context per direction for the whole connection, each block ended by a sync
flush.

:class:`FrameReader` turns bytes as they arrive into frames; :class:`FrameWriter` turns
frames into bytes. Neither does I/O.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02

SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9

PROTOCOL_ERROR = 1
CANCEL = 5
"""RST_STREAM status codes."""

MAX_DATA = (1 << 24) - 1

_WORDS = (
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()
"""The header compression dictionary of SPDY/3 (section 2.6.10.1): its words, each with a
4-byte length, then the status lines, dates and content types run together."""

Headers = dict[str, list[str]]


class SpdyError(Exception):
    """The peer sent something that is not SPDY/3.1."""


@dataclass(frozen=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool = False


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    fin: bool = False
    associated: int = 0
    priority: int = 0


@dataclass(frozen=True)
class SynReply:
    stream_id: int
    headers: Headers = field(default_factory=dict)
    fin: bool = False


@dataclass(frozen=True)
class HeadersFrame:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class Ping:
    id: int


@dataclass(frozen=True)
class GoAway:
    last_good: int
    status: int = 0


@dataclass(frozen=True)
class Other:
    """SETTINGS, WINDOW_UPDATE or an unknown control frame: read and passed on as they are."""

    type: int
    payload: bytes


Frame = Data | SynStream | SynReply | HeadersFrame | RstStream | Ping | GoAway | Other


def encode_headers(headers: Headers) -> bytes:
    """A name/value block before compression (names lower case, values joined by NUL)."""
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        key, value = name.lower().encode(), "\x00".join(values).encode()
        out += [struct.pack(">I", len(key)), key, struct.pack(">I", len(value)), value]
    return b"".join(out)


def decode_headers(block: bytes) -> Headers:
    """The name/value block (decompressed): names as sent, each with its values."""
    try:
        (count,) = struct.unpack_from(">I", block, 0)
        at, out = 4, {}
        for _ in range(count):
            (n,) = struct.unpack_from(">I", block, at)
            name = block[at + 4 : at + 4 + n].decode()
            at += 4 + n
            (n,) = struct.unpack_from(">I", block, at)
            value = block[at + 4 : at + 4 + n].decode()
            at += 4 + n
            out[name] = value.split("\x00")
    except (struct.error, UnicodeDecodeError) as e:
        raise SpdyError(f"a header block that does not parse: {e}") from e
    return out


def _stream_id(payload: bytes, at: int = 0) -> int:
    return int(struct.unpack_from(">I", payload, at)[0]) & 0x7FFFFFFF


class FrameReader:
    """Frames out of the bytes of one direction of a connection, fed as they arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head, payload = bytes(self._buffer[:8]), bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frames.append(self._frame(head, payload))
        return frames

    def _block(self, data: bytes) -> Headers:
        try:
            return decode_headers(self._inflate.decompress(data))
        except zlib.error as e:
            raise SpdyError(f"a header block that does not decompress: {e}") from e

    def _frame(self, head: bytes, payload: bytes) -> Frame:
        flags = head[4]
        fin = bool(flags & FLAG_FIN)
        if not head[0] & 0x80:
            return Data(_stream_id(head), payload, fin)
        version, kind = struct.unpack(">HH", head[:4])
        if version & 0x7FFF != VERSION:
            raise SpdyError(f"SPDY version {version & 0x7FFF}, not {VERSION}")
        if kind == SYN_STREAM:
            return SynStream(
                _stream_id(payload),
                self._block(payload[10:]),
                fin,
                _stream_id(payload, 4),
                payload[8] >> 5,
            )
        if kind in (SYN_REPLY, HEADERS):
            cls = SynReply if kind == SYN_REPLY else HeadersFrame
            return cls(_stream_id(payload), self._block(payload[4:]), fin)
        if kind == RST_STREAM:
            return RstStream(_stream_id(payload), struct.unpack_from(">I", payload, 4)[0])
        if kind == PING:
            return Ping(struct.unpack_from(">I", payload, 0)[0])
        if kind == GOAWAY:
            status = struct.unpack_from(">I", payload, 4)[0] if len(payload) >= 8 else 0
            return GoAway(_stream_id(payload), status)
        return Other(kind, payload)


class FrameWriter:
    """Bytes for frames sent in one direction of a connection (its header compression context
    is the connection's: write every frame of the direction through one writer, in order)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(level=9, zdict=DICTIONARY)

    def _block(self, headers: Headers) -> bytes:
        return self._deflate.compress(encode_headers(headers)) + self._deflate.flush(
            zlib.Z_SYNC_FLUSH
        )

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def write(self, frame: Frame) -> bytes:
        if isinstance(frame, Data):
            if len(frame.data) > MAX_DATA:
                raise SpdyError(f"a data frame of {len(frame.data)} bytes (at most {MAX_DATA})")
            flags = FLAG_FIN if frame.fin else 0
            return struct.pack(">II", frame.stream_id, (flags << 24) | len(frame.data)) + frame.data
        if isinstance(frame, SynStream):
            fixed = struct.pack(">IIBB", frame.stream_id, frame.associated, frame.priority << 5, 0)
            flags = FLAG_FIN if frame.fin else 0
            return self._control(SYN_STREAM, flags, fixed + self._block(frame.headers))
        if isinstance(frame, SynReply | HeadersFrame):
            kind = SYN_REPLY if isinstance(frame, SynReply) else HEADERS
            flags = FLAG_FIN if frame.fin else 0
            return self._control(
                kind, flags, struct.pack(">I", frame.stream_id) + self._block(frame.headers)
            )
        if isinstance(frame, RstStream):
            return self._control(RST_STREAM, 0, struct.pack(">II", frame.stream_id, frame.status))
        if isinstance(frame, Ping):
            return self._control(PING, 0, struct.pack(">I", frame.id))
        if isinstance(frame, GoAway):
            return self._control(GOAWAY, 0, struct.pack(">II", frame.last_good, frame.status))
        return self._control(frame.type, 0, frame.payload)
