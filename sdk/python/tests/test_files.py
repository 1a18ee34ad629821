"""Files both ways: whole, streamed, as archives; and paths dend refuses."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile

import pytest

import den


def test_binary_round_trip_and_mode(client, sb):
    data = bytes(range(256)) * 64 + b"\x00\xff\r\n"
    client.write_file(sb.name, "/root/blob.bin", data, mode=0o751)
    assert client.read_file(sb.name, "/root/blob.bin") == data
    info = client.stat(sb.name, "/root/blob.bin")
    assert (info.name, info.path, info.size, info.type, info.mode) == ("blob.bin", "/root/blob.bin", len(data), "file", 0o751)
    # Written on the host side is what the sandbox sees.
    assert client.exec(sb.name, ["sha256sum", "/root/blob.bin"]).stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
    client.write_file(sb.name, "/root/text.txt", "héllo\n")
    assert client.read_file(sb.name, "/root/text.txt") == "héllo\n".encode()


def test_large_file_streamed_both_ways(client, sb):
    size, block = 48 << 20, 1 << 20
    sent = hashlib.sha256()

    def blocks():  # never the whole file in memory
        for i in range(size // block):
            b = os.urandom(16) * (block // 16)
            sent.update(b)
            yield b

    client.write_file(sb.name, "/root/big", blocks())
    assert client.stat(sb.name, "/root/big").size == size

    got, n = hashlib.sha256(), 0
    with client.open_file(sb.name, "/root/big") as r:
        for chunk in r:
            assert len(chunk) <= 1 << 20
            got.update(chunk)
            n += len(chunk)
    assert n == size and got.digest() == sent.digest()

    # A file object streams too.
    f = io.BytesIO(b"x" * (3 << 20))
    client.write_file(sb.name, "/root/from-file", f)
    assert client.stat(sb.name, "/root/from-file").size == 3 << 20


def test_list_mkdir_move_remove(client, sb):
    client.mkdir(sb.name, "/srv/app/static", parents=True)
    client.write_file(sb.name, "/srv/app/a.txt", b"a")
    client.move(sb.name, "/srv/app/a.txt", "/srv/app/b.txt")
    entries = {f.name: f for f in client.list_files(sb.name, "/srv/app")}
    assert set(entries) == {"b.txt", "static"}
    assert entries["static"].type == "dir" and entries["b.txt"].size == 1
    with pytest.raises(den.NotFound):
        client.stat(sb.name, "/srv/app/a.txt")
    with pytest.raises(den.Conflict):
        client.mkdir(sb.name, "/srv/app/static")
    with pytest.raises(den.DenError) as e:
        client.remove_file(sb.name, "/srv/app")  # not empty, not recursive
    assert e.value.hint or e.value.message
    client.remove_file(sb.name, "/srv/app", recursive=True)
    with pytest.raises(den.NotFound):
        client.list_files(sb.name, "/srv/app")


def test_archives_both_ways(client, sb):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in (("top.txt", b"top"), ("sub/deep.txt", b"deep")):
            ti = tarfile.TarInfo(name)
            ti.size = len(body)
            tar.addfile(ti, io.BytesIO(body))
    client.write_archive(sb.name, "/opt/tree", buf.getvalue())
    assert client.read_file(sb.name, "/opt/tree/sub/deep.txt") == b"deep"

    with client.read_archive(sb.name, "/opt/tree") as r:
        with tarfile.open(fileobj=r, mode="r|") as tar:
            got = {m.name.lstrip("./"): tar.extractfile(m).read() for m in tar if m.isfile()}
    assert got == {"top.txt": b"top", "sub/deep.txt": b"deep"}


@pytest.mark.parametrize("path", ["/etc/../../etc/passwd", "/root/../..", "etc/passwd", "", "/root/\x00x"])
def test_paths_dend_refuses(client, sb, path):
    for call in (lambda: client.read_file(sb.name, path),
                 lambda: client.write_file(sb.name, path, b"x"),
                 lambda: client.stat(sb.name, path)):
        with pytest.raises(den.Invalid) as e:
            call()
        assert e.value.status == 400 and e.value.message
    # Nothing was written anywhere.
    assert client.exec(sb.name, "ls /etc/passwd /root").ok


def test_missing_file(client, sb):
    with pytest.raises(den.NotFound) as e:
        client.read_file(sb.name, "/no/such/file")
    assert "/no/such/file" in e.value.message
