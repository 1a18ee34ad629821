"""A small RFC 6455 WebSocket client, enough for den's exec stream.

The handshake is the transport's (an HTTP/1.1 Upgrade on a connection of
its own, see :meth:`den._http.Transport.upgrade`); this module speaks the
frames on the socket it hands over:

- client frames are masked with a fresh 4-byte key each (section 5.3);
- messages may arrive fragmented (FIN clear, then continuation frames),
  with control frames between the fragments (section 5.4);
- a ping is answered with a pong carrying its payload; pongs are ignored;
- a close frame is answered with one (echoing its code) and ends the
  stream; :meth:`WebSocket.close` starts that handshake from this side.

Writes are serialized by a lock, so one thread may send stdin while
another reads output; reads belong to one thread.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from typing import Optional, Tuple

OP_CONT = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_TOO_BIG = 1009

# The largest message this client accepts; dend sends at most 32 KiB.
MAX_MESSAGE = 16 << 20


class WebSocketError(Exception):
    """The stream broke: the peer broke the protocol or the connection."""


class Closed(WebSocketError):
    """The peer closed the stream; code and reason are what it said."""

    def __init__(self, code: int, reason: str):
        super().__init__(f"closed by the peer ({code}{': ' + reason if reason else ''})")
        self.code = code
        self.reason = reason


def mask(key: bytes, data: bytes) -> bytes:
    """XOR data with the 4-byte key repeated (masking and unmasking alike)."""
    n = len(data)
    if n == 0:
        return b""
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


def encode_frame(opcode: int, payload: bytes, *, fin: bool = True, key: Optional[bytes] = None) -> bytes:
    """One frame: masked with key (a fresh random one unless given) as a
    client must, or unmasked when key is b"" (a server's frames)."""
    if key is None:
        key = os.urandom(4)
    b0 = (0x80 if fin else 0) | opcode
    masked = 0x80 if key else 0
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", b0, masked | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", b0, masked | 126, n)
    else:
        head = struct.pack("!BBQ", b0, masked | 127, n)
    if key:
        return head + key + mask(key, payload)
    return head + payload


def read_frame(reader) -> Tuple[bool, int, bytes, bool]:
    """Read one frame: (fin, opcode, payload unmasked, was masked)."""
    head = _read_exactly(reader, 2)
    fin = bool(head[0] & 0x80)
    if head[0] & 0x70:
        raise WebSocketError("a frame with reserved bits set (no extension was agreed)")
    opcode = head[0] & 0x0F
    masked = bool(head[1] & 0x80)
    n = head[1] & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", _read_exactly(reader, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", _read_exactly(reader, 8))
    if opcode >= 0x8 and (n > 125 or not fin):
        raise WebSocketError("a control frame that is fragmented or over 125 bytes")
    if n > MAX_MESSAGE:
        raise WebSocketError(f"a frame of {n} bytes, over the limit of {MAX_MESSAGE}")
    key = _read_exactly(reader, 4) if masked else b""
    payload = _read_exactly(reader, n)
    if masked:
        payload = mask(key, payload)
    return fin, opcode, payload, masked


def _read_exactly(reader, n: int) -> bytes:
    if n == 0:
        return b""
    b = reader.read(n)
    if b is None or len(b) < n:
        raise WebSocketError("the connection ended in the middle of a frame" if b else "the connection ended")
    return b


class WebSocket:
    """A client WebSocket over a socket whose handshake is done.

    reader is a buffered binary reader over sock (it may hold bytes the
    handshake read ahead).
    """

    def __init__(self, sock: socket.socket, reader, *, max_message: int = MAX_MESSAGE):
        self.sock = sock
        self.reader = reader
        self.max_message = max_message
        self._wmu = threading.Lock()
        self._sent_close = False
        self._closed = False
        self.close_code: Optional[int] = None

    def send(self, opcode: int, payload: bytes, *, fragment: int = 0) -> None:
        """Send one message; with fragment > 0, in frames of at most that
        many bytes (a text or binary frame, then continuation frames)."""
        if fragment <= 0 or len(payload) <= fragment:
            self._write(encode_frame(opcode, payload))
            return
        frames = []
        for i in range(0, len(payload), fragment):
            last = i + fragment >= len(payload)
            frames.append(encode_frame(opcode if i == 0 else OP_CONT, payload[i:i + fragment], fin=last))
        self._write(b"".join(frames))

    def send_binary(self, payload: bytes) -> None:
        self.send(OP_BINARY, payload)

    def send_text(self, text: str) -> None:
        self.send(OP_TEXT, text.encode("utf-8"))

    def _write(self, data: bytes) -> None:
        with self._wmu:
            if self._sent_close:
                raise WebSocketError("the stream is closing")
            try:
                self.sock.sendall(data)
            except OSError as e:
                raise WebSocketError(f"writing: {e}") from e

    def _write_control(self, opcode: int, payload: bytes) -> None:
        with self._wmu:
            if self._sent_close:
                return
            if opcode == OP_CLOSE:
                self._sent_close = True
            try:
                self.sock.sendall(encode_frame(opcode, payload))
            except OSError:
                pass  # the reader will see the connection end

    def recv(self) -> Tuple[int, bytes]:
        """Read the next message: (OP_TEXT or OP_BINARY, payload). Pings
        are answered on the way; a close frame is answered and raises
        :class:`Closed`."""
        opcode, parts, size = None, [], 0
        while True:
            try:
                fin, op, payload, masked = read_frame(self.reader)
            except OSError as e:
                raise WebSocketError(f"reading: {e}") from e
            except WebSocketError:
                self.abort()
                raise
            if masked:
                self.fail(CLOSE_PROTOCOL_ERROR, "a server frame was masked")
            if op == OP_PING:
                self._write_control(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                reason = payload[2:].decode("utf-8", "replace")
                self.close_code = code
                self._write_control(OP_CLOSE, payload[:2])
                self.abort()
                raise Closed(code, reason)
            if op == OP_CONT:
                if opcode is None:
                    self.fail(CLOSE_PROTOCOL_ERROR, "a continuation frame with no message to continue")
            elif op in (OP_TEXT, OP_BINARY):
                if opcode is not None:
                    self.fail(CLOSE_PROTOCOL_ERROR, "a new message in the middle of a fragmented one")
                opcode = op
            else:
                self.fail(CLOSE_PROTOCOL_ERROR, f"an unknown opcode {op:#x}")
            size += len(payload)
            if size > self.max_message:
                self.fail(CLOSE_TOO_BIG, f"a message over {self.max_message} bytes")
            parts.append(payload)
            if fin:
                return opcode, parts[0] if len(parts) == 1 else b"".join(parts)

    def fail(self, code: int, why: str) -> None:
        """Close the stream because the peer broke the protocol, and raise."""
        self._write_control(OP_CLOSE, struct.pack("!H", code))
        self.abort()
        raise WebSocketError(why)

    def close(self, code: int = CLOSE_NORMAL, wait: float = 1.0) -> None:
        """Close the stream: send a close frame, wait up to wait seconds for
        the peer's (dropping any messages still coming), then close the
        connection."""
        if self._closed:
            return
        self._write_control(OP_CLOSE, struct.pack("!H", code))
        if self.close_code is None and wait > 0:
            try:
                self.sock.settimeout(wait)
                while True:
                    self.recv()
            except (WebSocketError, OSError):
                pass
        self.abort()

    def abort(self) -> None:
        """Close the connection at once, without the closing handshake; a
        read blocked in another thread returns."""
        if self._closed:
            return
        self._closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.reader.close()
        except Exception:
            pass
        self.sock.close()
