"""Tokens: an owner token reaches only its own sandboxes; another owner's
are answered exactly as missing ones; tokens dend refuses say why."""

from __future__ import annotations

import secrets

import pytest

import den
from conftest import need


def owners():
    host = need("DEN_TEST_TCP")
    tokens = need("DEN_TEST_OWNER_TOKENS").split(",")
    assert len(tokens) == 2, "DEN_TEST_OWNER_TOKENS holds two owner tokens, comma-separated"
    return den.Client(host=host, token=tokens[0]), den.Client(host=host, token=tokens[1])


# What bob tries on alice's sandbox, by its id.
TRIES = [
    ("get", lambda c, i: c.get(i)),
    ("exec", lambda c, i: c.exec(i, ["true"])),
    ("exec_detached", lambda c, i: c.exec_detached(i, ["true"])),
    ("read_file", lambda c, i: c.read_file(i, "/etc/hostname")),
    ("write_file", lambda c, i: c.write_file(i, "/root/bob", b"bob was here")),
    ("pause", lambda c, i: c.pause(i)),
    ("hibernate", lambda c, i: c.hibernate(i)),
    ("checkpoint", lambda c, i: c.checkpoint(i)),
    ("fork", lambda c, i: c.fork(i, "stolen")),
    ("expose_port", lambda c, i: c.expose_port(i, 8080, public=True)),
    ("set_network", lambda c, i: c.set_network(i, "open")),
    ("set_limits", lambda c, i: c.set_limits(i, memory="512M")),
    ("remove", lambda c, i: c.remove(i, force=True)),
]


def test_owner_isolation(client, is_admin):
    alice, bob = owners()
    name = "py-owned-" + secrets.token_hex(3)
    mine = alice.create(name, "busybox", memory="256M")
    try:
        # Names are per owner: bob may have one too.
        his = bob.create(name, "busybox", memory="256M")
        assert his.id != mine.id and his.owner != mine.owner
        assert mine.id not in [s.id for s in bob.list()]
        assert his.id not in [s.id for s in alice.list()]

        unknown = "zz" + secrets.token_hex(5)
        with pytest.raises(den.NotFound) as missing:
            bob.get(unknown)
        for what, call in TRIES:
            with pytest.raises(den.NotFound) as e:
                call(bob, mine.id)
            # Down to the words of the 404 of a sandbox that does not exist.
            assert e.value.message == missing.value.message.replace(unknown, mine.id), what
            assert e.value.hint == missing.value.hint

        after = alice.get(mine.id)
        assert (after.state, after.generation, after.memory_bytes, after.ports, after.network.mode) == \
            ("running", mine.generation, mine.memory_bytes, [], "none")
        assert alice.checkpoints(mine.id) == []
        assert alice.read_file(mine.id, "/etc/hostname")
        with pytest.raises(den.NotFound):
            alice.stat(mine.id, "/root/bob")
        assert alice.owner().use.sandboxes >= 1

        if is_admin:
            # An admin sees both, and a name two owners hold is ambiguous.
            ids = {s.id for s in client.list()}
            assert {mine.id, his.id} <= ids
            with pytest.raises(den.Conflict) as e:
                client.get(name)
            assert mine.id in e.value.hint and his.id in e.value.hint
        # Secrets are an admin's.
        with pytest.raises(den.Forbidden) as e:
            alice.list_secrets()
        assert e.value.hint
    finally:
        alice.remove(mine.id, force=True)
        for sb in bob.list():
            if sb.name == name:
                bob.remove(sb.id, force=True)


@pytest.mark.parametrize("which,words", [("DEN_TEST_REVOKED_TOKEN", "was revoked"), ("DEN_TEST_EXPIRED_TOKEN", "expired at"), ("", "missing")])
def test_refused_tokens(which, words):
    host = need("DEN_TEST_TCP")
    c = den.Client(host=host, token=need(which) if which else None)
    for call in (c.list, lambda: c.create("py-refused", "busybox"), lambda: c.exec("py-refused", ["true"])):
        with pytest.raises(den.Unauthorized) as e:
            call()
        assert words in e.value.message and e.value.hint and e.value.status == 401
