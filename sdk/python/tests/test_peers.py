"""Peers: a sandbox's read-only view of another sandbox's files."""

from __future__ import annotations

import pytest

import den


def test_peer_view_is_readable_and_read_only(client, names):
    coder = client.create(names("coder"), "busybox", memory="256M")
    reviewer = client.create(names("rev"), "busybox", memory="256M")
    assert client.exec(coder.name, "mkdir -p /work && echo v1 > /work/a.txt").ok
    at = f"/peers/{coder.name}"

    # A paused viewer's den-init, which mounts views outside /peers, is
    # frozen: refused without restart, nothing changed.
    client.pause(reviewer.name)
    with pytest.raises(den.Conflict) as e:
        client.add_peer(reviewer.name, coder.name, at="/review/x")
    assert "restart" in str(e.value)
    assert client.peers(reviewer.name) == []
    client.resume(reviewer.name)

    p = reviewer.add_peer(coder.name, restart=True)
    assert isinstance(p, den.Peer) and p.id and p.taken_at is not None
    assert (p.sandbox, p.sandbox_id, p.at, p.checkpoint) == (coder.name, coder.id, at, "")
    assert [v.id for v in client.peers(reviewer.name)] == [p.id]
    assert client.exec(reviewer.name, f"cat {at}/work/a.txt").stdout_text == "v1\n"

    w = client.exec(reviewer.name, f"echo x > {at}/work/a.txt")
    assert not w.ok and "read-only" in w.stderr_text.lower(), w.stderr_text
    with pytest.raises(den.DenError):
        client.write_file(reviewer.name, f"{at}/work/a.txt", "x")
    assert client.exec(coder.name, "cat /work/a.txt").stdout_text == "v1\n"
    assert client.peers(coder.name) == [], "the viewed sandbox never sees its viewer"

    # A snapshot: coder's later writes show once it is taken again.
    assert client.exec(coder.name, "echo v2 > /work/a.txt").ok
    assert client.exec(reviewer.name, f"cat {at}/work/a.txt").stdout_text == "v1\n"
    again = client.refresh_peer(reviewer.name, coder.name, restart=True)
    assert (again.sandbox_id, again.at) == (coder.id, at) and again.taken_at >= p.taken_at
    assert [v.id for v in client.peers(reviewer.name)] == [again.id], "taken again, not added"
    assert client.exec(reviewer.name, f"cat {at}/work/a.txt").stdout_text == "v2\n"

    client.remove_peer(reviewer.name, again.id, restart=True)
    assert client.peers(reviewer.name) == []
    assert not client.exec(reviewer.name, f"test -e {at}/work/a.txt").ok


def test_live_view_without_restart(client, names):
    coder = client.create(names("coder"), "busybox", memory="256M")
    reviewer = client.create(names("rev"), "busybox", memory="256M")
    assert client.exec(coder.name, "mkdir -p /work && echo v1 > /work/a.txt").ok
    gen = client.get(reviewer.name).generation

    p = client.add_peer(reviewer.name, coder.name, live=True)
    assert p.live and p.at == f"/peers/{coder.name}"
    assert [v.live for v in client.peers(reviewer.name)] == [True]
    assert client.exec(reviewer.name, f"cat {p.at}/work/a.txt").stdout_text == "v1\n"
    assert client.exec(coder.name, "echo v2 > /work/a.txt && sync").ok
    assert client.exec(reviewer.name, f"cat {p.at}/work/a.txt").stdout_text == "v2\n", "live: no refresh needed"
    w = client.exec(reviewer.name, f"echo x > {p.at}/work/a.txt")
    assert not w.ok and "read-only" in w.stderr_text.lower(), w.stderr_text

    client.remove_peer(reviewer.name, p.id)
    assert not client.exec(reviewer.name, f"test -e {p.at}/work").ok
    assert client.get(reviewer.name).generation == gen, "no change restarted the reader"
    with pytest.raises(den.Invalid):
        client.add_peer(reviewer.name, coder.name, live=True, checkpoint="v1")


def test_peers_refuse_bad_input(client, sb):
    with pytest.raises(den.NotFound):
        client.peers("py-no-such-sandbox")
    with pytest.raises(den.NotFound):
        client.add_peer(sb.name, "py-no-such-sandbox", restart=True)
    with pytest.raises(den.NotFound):
        client.remove_peer(sb.name, "py-no-such-view")
    with pytest.raises(den.Invalid):
        client.add_peer(sb.name, sb.name, at="relative", restart=True)
    assert client.peers(sb.name) == []
