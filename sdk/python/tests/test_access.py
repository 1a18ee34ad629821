"""Warm pools (admin) and the SSH gateway's keys (per token)."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import struct
import time

import pytest

import den
from test_owners import owners


def test_warm_pool_shows_with_its_count(client, is_admin):
    if not is_admin:
        with pytest.raises(den.Forbidden) as e:
            client.set_warm("busybox", 1)
        assert e.value.status == 403
        assert "busybox" not in client.warm_pools() or client.warm_pools()["busybox"].target == 0
        return
    try:
        p = client.set_warm("busybox", 1, memory_bytes=256 << 20)
        assert isinstance(p, den.WarmPool) and p.target == 1 and p.memory_bytes == 256 << 20
        deadline = time.monotonic() + 120
        while True:
            pool = client.warm_pools()["busybox"]
            assert pool.target == 1 and pool.memory_bytes == 256 << 20
            if pool.ready == 1:
                break
            assert time.monotonic() < deadline, f"the pool never filled: {pool}"
            time.sleep(0.5)
        assert pool.host_memory_bytes > 0
    finally:
        emptied = client.set_warm("busybox", 0)
    assert emptied.target == 0
    assert client.warm_pools().get("busybox", den.WarmPool()).target == 0


def test_warm_pool_refuses_bad_input(client, is_admin):
    if not is_admin:
        return  # refused as forbidden above, whatever the input
    with pytest.raises(den.NotFound):
        client.set_warm("py-no-such-image", 1)
    with pytest.raises(den.Invalid):
        client.set_warm("busybox", 65)
    with pytest.raises(den.Invalid):
        client.set_warm("busybox", -1)
    assert client.warm_pools().get("busybox", den.WarmPool()).target == 0


def ed25519_key(comment: str):
    """A public key in authorized_keys form, and its SHA256 fingerprint."""
    blob = struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + os.urandom(32)
    fp = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"ssh-ed25519 {base64.b64encode(blob).decode()} {comment}", fp


def test_ssh_keys_add_list_remove(client, is_admin):
    alice, bob = owners()
    name = "py-" + secrets.token_hex(3)
    text, fp = ed25519_key("me@laptop")
    k = alice.add_ssh_key(name, text)
    try:
        assert isinstance(k, den.SSHKey) and k.created_at is not None and k.token_id
        assert (k.name, k.fingerprint, k.type, k.comment) == (name, fp, "ssh-ed25519", "me@laptop")
        assert k.public_key == text.rsplit(" ", 1)[0]
        assert fp in [x.fingerprint for x in alice.list_ssh_keys()]
        assert fp not in [x.fingerprint for x in bob.list_ssh_keys()], "bob sees alice's key"
        with pytest.raises(den.NotFound):
            bob.remove_ssh_key(name)
        if is_admin:
            assert fp in [x.fingerprint for x in client.list_ssh_keys()], "an admin sees every key"
        with pytest.raises(den.Conflict):
            alice.add_ssh_key(name, ed25519_key("other")[0])
    finally:
        alice.remove_ssh_key(fp)  # by fingerprint
        alice.close()
        bob.close()
    assert name not in [x.name for x in client.list_ssh_keys()]


def test_ssh_keys_refuse_bad_input(client):
    if not os.environ.get("DEN_HOST"):
        # Root on the socket has no token to tie a key to.
        with pytest.raises(den.Invalid) as e:
            client.add_ssh_key("py-root", ed25519_key("root")[0])
        assert "token" in str(e.value)
    else:
        with pytest.raises(den.Invalid):
            client.add_ssh_key("py-bad", "this is not a key")
    with pytest.raises(den.NotFound):
        client.remove_ssh_key("py-no-such-key")
