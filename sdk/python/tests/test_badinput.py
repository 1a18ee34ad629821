"""Bad input: every refusal is the exception of its code, carries dend's
message and a hint, and changes nothing."""

from __future__ import annotations

import secrets

import pytest

import den
from conftest import sandbox_names

# (what, call given the client and an existing sandbox's name, exception)
CREATES = [
    ("invalid name", lambda c, n: c.create("Bad_Name!", "busybox"), den.Invalid),
    ("memory not a size", lambda c, n: c.create(n + "-x", "busybox", memory="lots"), den.Invalid),
    ("memory too small", lambda c, n: c.create(n + "-x", "busybox", memory="1M"), den.Invalid),
    ("negative disk", lambda c, n: c.create(n + "-x", "busybox", disk="-5G"), den.Invalid),
    ("negative cpus", lambda c, n: c.create(n + "-x", "busybox", cpus=-1), den.Invalid),
    ("too many cpus", lambda c, n: c.create(n + "-x", "busybox", cpus=1000), den.Invalid),
    ("too few pids", lambda c, n: c.create(n + "-x", "busybox", pids=3), den.Invalid),
    ("env value not a string", lambda c, n: c.create(n + "-x", "busybox", env={"A": 1}), den.Invalid),
    ("labels not a map", lambda c, n: c.create(n + "-x", "busybox", labels=["a"]), den.Invalid),
    ("bad network rule", lambda c, n: c.create(n + "-x", "busybox", network={"mode": "allow", "allow": ["10.0.0.0/8"]}), den.Invalid),
    ("bad policy duration", lambda c, n: c.create(n + "-x", "busybox", policy={"ttl": "soon"}), den.Invalid),
    ("unknown image", lambda c, n: c.create(n + "-x", "no-such-image"), den.NotFound),
    ("unknown checkpoint", lambda c, n: c.create(n + "-x", from_=n + ":nope"), den.NotFound),
    ("name taken", lambda c, n: c.create(n, "busybox"), den.Conflict),
    ("oversized body", lambda c, n: c.create(n + "-x", "busybox", labels={"a": "a" * (2 << 20)}), den.TooLarge),
]

OTHERS = [
    ("empty argv", lambda c, n: c.exec(n, []), den.Invalid),
    ("argv not strings", lambda c, n: c.exec(n, [1, 2]), den.Invalid),
    ("malformed timeout", lambda c, n: c.exec(n, ["true"], timeout="soon"), den.Invalid),
    ("malformed output cap", lambda c, n: c.exec(n, ["true"], output_max="huge"), den.Invalid),
    ("detached, empty argv", lambda c, n: c.exec_detached(n, []), den.Invalid),
    ("checkpoint name", lambda c, n: c.checkpoint(n, "bad name!"), den.Invalid),
    ("fork count", lambda c, n: c.fork(n, n + "-kid", count=1000), den.Invalid),
    ("fork name", lambda c, n: c.fork(n, "Kid!"), den.Invalid),
    ("restore unknown checkpoint", lambda c, n: c.restore(n, "nope"), den.NotFound),
    ("log stream", lambda c, n: c.logs(n, "nope", stream="both"), den.Invalid),
    ("unknown run", lambda c, n: c.get_run(n, "nope"), den.NotFound),
    ("runs limit", lambda c, n: c.runs(n, limit=-1), den.Invalid),
    ("port 0", lambda c, n: c.expose_port(n, 0), den.Invalid),
    ("port not a number", lambda c, n: c.expose_port(n, "http"), den.Invalid),
    ("link lifetime", lambda c, n: c.port_url(n, 8080, expires="forever"), den.Invalid),
    ("file mode", lambda c, n: c.write_file(n, "/root/x", b"x", mode="999"), den.Invalid),
    ("negative ttl", lambda c, n: c.set_policy(n, ttl="-1h"), den.Invalid),
    ("pids limit", lambda c, n: c.set_limits(n, pids=3), den.Invalid),
    ("memory limit", lambda c, n: c.set_limits(n, memory="1M"), den.Invalid),
    ("network mode", lambda c, n: c.set_network(n, "sideways"), den.Invalid),
    ("recover mode", lambda c, n: c.recover(n, "sideways"), den.Invalid),
    ("unknown request key", lambda c, n: c.request("nope"), den.NotFound),
]

UNKNOWN = [
    ("get", lambda c, n: c.get(n)),
    ("exec", lambda c, n: c.exec(n, ["true"])),
    ("exec_detached", lambda c, n: c.exec_detached(n, ["true"])),
    ("read_file", lambda c, n: c.read_file(n, "/etc/passwd")),
    ("write_file", lambda c, n: c.write_file(n, "/root/x", iter([b"x" * (1 << 20)] * 4))),
    ("pause", lambda c, n: c.pause(n)),
    ("hibernate", lambda c, n: c.hibernate(n)),
    ("checkpoint", lambda c, n: c.checkpoint(n)),
    ("fork", lambda c, n: c.fork(n, n + "-kid")),
    ("expose_port", lambda c, n: c.expose_port(n, 8080)),
    ("set_limits", lambda c, n: c.set_limits(n, memory="1G")),
    ("remove", lambda c, n: c.remove(n, force=True)),
]


@pytest.fixture(scope="module")
def target(client):
    """The sandbox the refused calls name; none of them may change it."""
    sb = client.create("py-badinput-" + secrets.token_hex(3), "busybox", memory="256M")
    yield sb
    client.remove(sb.id, force=True)


def refused(client, call, exc):
    """Run call, which must be refused with exc carrying a message and a
    hint, and return the error."""
    with pytest.raises(exc) as e:
        call()
    err = e.value
    assert err.code == exc.code and err.message
    assert err.hint, f"{err!r} has no hint"
    assert str(err) == f"{err.message} (hint: {err.hint})"
    return err


@pytest.mark.parametrize("what,call,exc", CREATES, ids=[c[0] for c in CREATES])
def test_bad_creates_make_nothing(client, target, what, call, exc):
    sb = target
    before = sandbox_names(client)
    err = refused(client, lambda: call(client, sb.name), exc)
    assert err.status in (400, 404, 409, 413)
    assert sandbox_names(client) == before


@pytest.mark.parametrize("what,call,exc", OTHERS, ids=[c[0] for c in OTHERS])
def test_bad_values_change_nothing(client, target, what, call, exc):
    sb = target
    before = client.get(sb.name)
    checkpoints = client.checkpoints(sb.name)
    refused(client, lambda: call(client, sb.name), exc)
    after = client.get(sb.name)
    assert (after.state, after.generation, after.memory_bytes, after.pids, after.policy, after.network, after.ports) == \
        (before.state, before.generation, before.memory_bytes, before.pids, before.policy, before.network, before.ports)
    assert client.checkpoints(sb.name) == checkpoints
    assert sandbox_names(client) >= {sb.name}


@pytest.mark.parametrize("what,call", UNKNOWN, ids=[c[0] for c in UNKNOWN])
def test_unknown_sandbox(client, names, what, call):
    before = sandbox_names(client)
    err = refused(client, lambda: call(client, names()), den.NotFound)
    assert err.status == 404 and "not found" in err.message
    assert sandbox_names(client) == before


def test_no_sandbox_named_is_refused_before_dend(client):
    with pytest.raises(den.Invalid) as e:
        client.get("")
    assert e.value.hint and e.value.status is None


def test_unreachable_dend_fails_at_once(tmp_path):
    c = den.Client(socket=str(tmp_path / "no.sock"))
    with pytest.raises(den.Unavailable) as e:
        c.create("x", "busybox")
    assert "cannot connect to dend" in e.value.message and "DEN_SOCKET" in e.value.hint
    assert not isinstance(e.value, den.OutcomeUnknown)  # never sent: nothing happened
