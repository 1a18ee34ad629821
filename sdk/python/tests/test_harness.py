"""The harness: the agent program, swapped on the sandbox as it is."""

from __future__ import annotations

import time

import pytest

import den


def wait_running(client, sandbox, name, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        s = next((s for s in client.services(sandbox) if s.name == name), None)
        if s is not None and s.state == "running":
            return s
        assert time.monotonic() < deadline, f"service {name}: {s}"
        time.sleep(0.1)


def test_harness_swaps_and_rolls_back(client, sb):
    assert client.exec(sb.name, "mkdir -p /work && echo mine > /work/notes").ok
    a = client.set_harness(sb.name, steps=["mkdir -p /opt/h && echo A > /opt/h/v"],
                           services=[{"name": "a", "argv": ["sleep", "100000"]}])
    assert isinstance(a, den.HarnessSet) and a.checkpoint and a.steps[0].harness
    assert wait_running(client, sb.name, "a").harness

    b = client.set_harness(sb.name, steps=["echo B > /opt/h/v"], services=[{"name": "b", "argv": ["sleep", "100001"]}],
                           config_paths=["/opt/conf"])
    assert b.sandbox.generation == a.sandbox.generation, "no new root"
    assert isinstance(b.harness, den.Harness) and b.harness.config_paths == ["/opt/conf"]
    wait_running(client, sb.name, "b")
    assert [s.name for s in client.services(sb.name)] == ["b"]
    assert client.exec(sb.name, "cat /opt/h/v /work/notes").stdout_text == "B\nmine\n"

    with pytest.raises(den.Conflict) as e:
        client.set_harness(sb.name, steps=["echo boom >&2; exit 3"])
    assert "harness step 1" in str(e.value) and "boom" in str(e.value)
    assert [s["name"] for s in client.harness(sb.name).services] == ["b"]
    assert client.exec(sb.name, "cat /opt/h/v").stdout_text == "B\n"

    for bad in ({"steps": [" "]}, {"config_paths": ["/usr"]}, {"services": [{"name": "x"}]}, {}):
        with pytest.raises(den.Invalid):
            client.set_harness(sb.name, **bad)

    client.remove_harness(sb.name)
    with pytest.raises(den.NotFound):
        client.harness(sb.name)
    assert client.services(sb.name) == []
