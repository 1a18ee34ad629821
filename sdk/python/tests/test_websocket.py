"""The SDK's RFC 6455 client against a peer speaking raw frames over a
socket pair: masking, lengths, fragmentation, ping/pong and close. These
need no dend (the exec tests drive the client against dend's own server)."""

from __future__ import annotations

import os
import socket
import struct
import threading

import pytest

from den._ws import (
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Closed,
    WebSocket,
    WebSocketError,
    encode_frame,
    mask,
    read_frame,
)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    ws = WebSocket(a, a.makefile("rb"))
    server = b.makefile("rb")
    yield ws, b, server
    ws.abort()
    server.close()
    b.close()


def server_send(sock, opcode, payload, fin=True, masked=False):
    sock.sendall(encode_frame(opcode, payload, fin=fin, key=os.urandom(4) if masked else b""))


def test_mask_is_xor_with_the_repeated_key():
    key = b"\x01\x02\x03\x04"
    data = os.urandom(1001)
    assert mask(key, data) == bytes(b ^ key[i % 4] for i, b in enumerate(data))
    assert mask(key, mask(key, data)) == data and mask(key, b"") == b""


@pytest.mark.parametrize("n", [0, 1, 125, 126, 127, 65535, 65536, 200000])
def test_lengths_both_ways(pair, n):
    ws, peer, server = pair
    data = os.urandom(n)
    t = threading.Thread(target=ws.send_binary, args=(data,))  # may be more than the socket holds
    t.start()
    fin, op, payload, masked = read_frame(server)
    t.join()
    assert (fin, op, masked, payload) == (True, OP_BINARY, True, data)
    t = threading.Thread(target=server_send, args=(peer, OP_BINARY, data))
    t.start()
    assert ws.recv() == (OP_BINARY, data)
    t.join()


def test_client_frames_are_masked_with_fresh_keys(pair):
    ws, peer, server = pair
    ws.send_text("same")
    ws.send_text("same")
    raw = peer.recv(64)
    first, second = raw[:len(raw) // 2], raw[len(raw) // 2:]
    assert first[1] & 0x80 and second[1] & 0x80  # the mask bit
    assert first[2:6] != second[2:6]  # the keys
    assert first[6:] != b"same"


def test_fragmented_message_with_a_ping_between(pair):
    ws, peer, server = pair
    server_send(peer, OP_TEXT, b"hel", fin=False)
    server_send(peer, OP_PING, b"are you there")
    server_send(peer, OP_CONT, b"lo ", fin=False)
    server_send(peer, OP_PONG, b"unasked")
    server_send(peer, OP_CONT, b"world")
    assert ws.recv() == (OP_TEXT, b"hello world")
    fin, op, payload, masked = read_frame(server)
    assert (op, payload, masked) == (OP_PONG, b"are you there", True)


def test_client_sends_fragments(pair):
    ws, peer, server = pair
    ws.send(OP_BINARY, b"abcdefgh", fragment=3)
    frames = [read_frame(server) for _ in range(3)]
    assert [(f[0], f[1], f[2]) for f in frames] == [
        (False, OP_BINARY, b"abc"), (False, OP_CONT, b"def"), (True, OP_CONT, b"gh")]


def test_server_close_is_answered(pair):
    ws, peer, server = pair
    server_send(peer, OP_CLOSE, struct.pack("!H", 1001) + b"going away")
    with pytest.raises(Closed) as e:
        ws.recv()
    assert (e.value.code, e.value.reason) == (1001, "going away")
    fin, op, payload, masked = read_frame(server)
    assert (op, payload) == (OP_CLOSE, struct.pack("!H", 1001))


def test_client_close_waits_for_the_peer(pair):
    ws, peer, server = pair

    def peer_side():
        fin, op, payload, masked = read_frame(server)
        assert (op, payload) == (OP_CLOSE, struct.pack("!H", 1000))
        server_send(peer, OP_BINARY, b"late output is dropped")
        server_send(peer, OP_CLOSE, payload)

    t = threading.Thread(target=peer_side)
    t.start()
    ws.close()
    t.join(5)
    assert ws.close_code == 1000
    with pytest.raises(WebSocketError):
        ws.send_text("after close")


@pytest.mark.parametrize("frame,why", [
    (encode_frame(OP_BINARY, b"x", key=b"\x01\x02\x03\x04"), "masked"),
    (bytes([0x80 | 0x40 | OP_BINARY, 1]) + b"x", "reserved"),
    (encode_frame(OP_CONT, b"x", key=b""), "continuation"),
    (bytes([0x80 | 0x3, 0]), "opcode"),
    (bytes([0x80 | OP_PING, 126, 0, 200]) + bytes(200), "control"),
])
def test_protocol_errors(pair, frame, why):
    ws, peer, server = pair
    peer.sendall(frame)
    with pytest.raises(WebSocketError) as e:
        ws.recv()
    assert why in str(e.value)


def test_connection_ending_mid_frame(pair):
    ws, peer, server = pair
    peer.sendall(bytes([0x80 | OP_BINARY, 10]) + b"short")
    peer.shutdown(socket.SHUT_WR)
    with pytest.raises(WebSocketError) as e:
        ws.recv()
    assert "middle of a frame" in str(e.value)
