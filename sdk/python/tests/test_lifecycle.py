"""Sandboxes from create to remove, and the handle a Sandbox is."""

from __future__ import annotations

import datetime

import pytest

import den
from conftest import sandbox_names


def test_create_get_list_stop_start_remove(client, names):
    name = names()
    sb = client.create(name, "busybox", memory="256M", env={"GREETING": "hi"}, labels={"team": "py"})
    assert isinstance(sb, den.Sandbox)
    assert sb.name == name and sb.state == "running" and sb.image == "busybox"
    assert sb.memory_bytes == 256 << 20 and sb.generation == 1
    assert sb.env == {"GREETING": "hi"} and sb.labels == {"team": "py"}
    assert isinstance(sb.created_at, datetime.datetime) and sb.created_at.tzinfo is not None
    assert sb.network.mode == "none" and sb.policy.pause_after

    got = client.get(name)
    assert got.id == sb.id and got.usage is not None and got.usage.pids >= 0
    assert name in sandbox_names(client)
    assert client.exec(name, "echo $GREETING").stdout == b"hi\n"

    stopped = client.stop(name)
    assert stopped.state == "stopped"
    started = client.start(name)
    assert started.state == "running" and started.generation == 2
    kinds = [e.type for e in client.events(name)]
    assert "created" in kinds and "stopped" in kinds

    with pytest.raises(den.Conflict) as e:
        client.remove(name)
    assert e.value.hint and e.value.status == 409
    client.remove(name, force=True)
    assert name not in sandbox_names(client)
    with pytest.raises(den.NotFound):
        client.get(name)


def test_handle_acts_on_its_sandbox_and_stays_current(client, names):
    sb = client.create(names(), "busybox", memory="256M")
    assert sb.exec(["echo", "from the handle"]).stdout_text == "from the handle\n"
    assert sb.stop() is sb and sb.state == "stopped"
    sb.start()
    assert sb.state == "running" and sb.generation == 2
    sb.write_file("/root/note", "kept")
    assert sb.read_file("/root/note") == b"kept"
    sb.remove(force=True)
    assert sb.refresh().state == "destroyed"  # by id, its record stays
    with pytest.raises(den.NotFound):
        client.get(sb.name)


def test_context_manager_removes_an_ephemeral_sandbox(client):
    before = sandbox_names(client)
    with client.sandbox(image="busybox", memory="256M") as sb:
        assert sb.ephemeral and sb.state == "running"
        assert sb.name.startswith("py-") and sb.name in sandbox_names(client)
        assert sb.exec("echo inside").stdout == b"inside\n"
    assert sandbox_names(client) == before

    # An exception in the block still removes it, and goes on up.
    with pytest.raises(RuntimeError):
        with client.sandbox(image="busybox", memory="256M") as sb:
            name = sb.name
            raise RuntimeError("the agent failed")
    assert name not in sandbox_names(client)


def test_health(client):
    h = client.health()
    assert h.status == "ok" and h.version and h.storage in ("btrfs", "copy")
