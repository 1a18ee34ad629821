"""Sleep and wake, checkpoints, restore and fork: processes survive."""

from __future__ import annotations

import pytest

import den


def counter(client, sb):
    """Start a process that keeps a count in memory and writes it on
    request, so a test can tell a process that lived on from a new one."""
    # Renamed into place: a read never sees the file truncated and empty.
    client.write_file(sb.name, "/root/count.sh",
                      "n=0; while :; do n=$((n+1)); echo $n > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.05; done\n")
    return client.exec_detached(sb.name, ["sh", "/root/count.sh"])


def read_count(client, sb) -> int:
    return int(client.read_file(sb.name, "/tmp/n").strip() or 0)


def test_pause_resume_hibernate_and_wake_by_exec(client, sb):
    counter(client, sb)
    client.exec(sb.name, "sleep 0.3")
    assert client.pause(sb.name).state == "paused"
    assert client.resume(sb.name).state == "running"

    before = read_count(client, sb)
    hib = client.hibernate(sb.name)
    assert hib.state == "hibernated" and hib.checkpoint
    assert client.get(sb.name).state == "hibernated"
    # A call that needs the sandbox wakes it, its processes where they were.
    r = client.exec(sb.name, "cat /tmp/n")
    assert r.ok and int(r.stdout) >= before
    assert client.get(sb.name).state == "running"
    assert any("count.sh" in p.command for p in client.processes(sb.name))


def test_checkpoint_restore_fork(client, sb, names):
    client.write_file(sb.name, "/root/state", b"v1")
    counter(client, sb)
    ck = client.checkpoint(sb.name, "v1")
    assert isinstance(ck, den.Checkpoint) and ck.name == "v1" and ck.kind == "manual" and ck.memory
    files_only = client.checkpoint(sb.name, fs_only=True)
    assert not files_only.memory and files_only.parent == ck.id

    client.write_file(sb.name, "/root/state", b"v2")
    restored = client.restore(sb.name, "v1")
    assert restored.state == "running" and restored.generation > sb.generation
    assert client.read_file(sb.name, "/root/state") == b"v1"
    assert any("count.sh" in p.command for p in client.processes(sb.name))  # its processes came back

    listed = client.checkpoints(sb.name)
    assert [c.id for c in listed][:2] == [ck.id, files_only.id]
    assert client.get_checkpoint(sb.name, "v1").id == ck.id

    child = names("child")
    kids = client.fork(sb.name, child, from_="v1", count=2)
    assert [k.name for k in kids] == [child + "-1", child + "-2"]
    assert all(k.state == "running" and k.origin == ck.id for k in kids)
    assert kids[0].read_file("/root/state") == b"v1"
    kids[0].write_file("/root/state", b"mine")
    assert client.read_file(kids[1].name, "/root/state") == b"v1"

    live = client.fork(sb.name, names("live"))[0]
    assert live.exec("cat /root/state").stdout == b"v1"

    from_ck = client.create(names("copy"), from_=f"{sb.name}:v1")
    assert from_ck.read_file("/root/state") == b"v1"

    with pytest.raises(den.Conflict) as e:  # a sandbox still needs it
        client.remove_checkpoint(sb.name, "v1")
    assert e.value.hint
    client.remove_checkpoint(sb.name, files_only.id)
    with pytest.raises(den.NotFound):
        client.get_checkpoint(sb.name, files_only.id)


def test_handle_take_checkpoint_and_restore(client, sb):
    ck = sb.take_checkpoint("base", fs_only=True)
    sb.write_file("/root/later", b"x")
    assert sb.restore(ck.id) is sb and sb.generation >= 2
    with pytest.raises(den.NotFound):
        sb.stat("/root/later")
