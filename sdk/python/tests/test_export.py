"""Export and import on one dend: an agent's archive, sealed, made again
under a new name with its files (and, unless fs_only, its processes)."""

from __future__ import annotations

import io
import secrets

import pytest

import den


def test_export_to_a_file_and_import_with_processes(client, sb, names, tmp_path):
    assert client.exec(sb.name, "echo kept > /root/note").ok
    client.exec_detached(sb.name, ["sh", "-c", "echo $$ > /tmp/pid; exec sleep 3600"])
    path = tmp_path / "agent.den"

    x = sb.export(path)
    assert isinstance(x, den.Export) and x.closed
    assert len(x.key) == 64 and x.memory and x.secrets == []
    data = path.read_bytes()
    assert len(data) > 0 and b"kept" not in data, "the archive is sealed"
    assert [p.name for p in tmp_path.iterdir()] == ["agent.den"], "no temporary file left"

    res = client.import_archive(str(path), x.key, name=names("copy"))
    assert isinstance(res, den.Import) and res.memory and res.from_ == sb.name
    copy = res.sandbox
    assert copy.state == "hibernated" and copy.name != sb.name
    assert copy.exec("cat /root/note").stdout_text == "kept\n"
    pid = client.exec(sb.name, "cat /tmp/pid").stdout_text
    assert copy.exec("cat /tmp/pid; kill -0 $(cat /tmp/pid) && echo alive").stdout_text == pid + "alive\n", \
        "its processes came along"


def test_export_stream_fs_only_and_a_wrong_key(client, sb, names):
    assert client.exec(sb.name, "mkdir -p /work && echo files > /work/f").ok
    key = secrets.token_hex(32)
    with client.export(sb.name, fs_only=True, key=key) as x:
        assert x.key == key and not x.memory
        data = x.read()
    assert data

    taken = names("bad")
    with pytest.raises(den.Invalid):
        client.import_archive(data, secrets.token_hex(32), name=taken)
    assert taken not in {s.name for s in client.list()}, "a refused import leaves nothing"
    with pytest.raises(den.Invalid):
        client.import_archive(data[: len(data) // 2], key, name=taken)
    assert taken not in {s.name for s in client.list()}

    res = client.import_archive(io.BytesIO(data), key, name=names("copy"))
    assert not res.memory and res.sandbox.state == "stopped"
    assert res.sandbox.start().state == "running"
    assert client.exec(res.sandbox.name, "cat /work/f").stdout_text == "files\n"


def test_export_refuses_bad_input(client):
    with pytest.raises(den.NotFound):
        client.export("py-no-such-sandbox", fs_only=True)
