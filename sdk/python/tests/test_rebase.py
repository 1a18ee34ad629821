"""Rebase and setup steps: a new root from an image, the kept paths
carried over and the setup steps run again; a failed step rolls back."""

from __future__ import annotations

import pytest

import den


def test_rebase_keeps_paths_and_runs_setup_again(client, names):
    sb = client.create(names(), "busybox", memory="256M", setup=["echo ran >> /root/setup.log"], keep=["/opt/data"])
    assert sb.setup == ["echo ran >> /root/setup.log"] and "/opt/data" in sb.keep and "/root" in sb.keep
    assert client.exec(sb.name, "cat /root/setup.log").stdout_text == "ran\n", "setup runs at create"
    assert client.exec(sb.name, "mkdir -p /opt/data && echo db > /opt/data/db && echo junk > /etc/junk").ok

    steps = ["echo ran >> /root/setup.log", "echo step two | tee /root/two"]
    assert sb.set_setup(steps=steps) is sb  # the handle takes the answer
    assert sb.setup == steps and "/opt/data" in sb.keep, "keep, not given, stays"
    assert client.exec(sb.name, "cat /root/setup.log").stdout_text == "ran\n", "set_setup runs nothing"

    gen = sb.generation
    r = sb.rebase()
    assert isinstance(r, den.Rebase) and r.checkpoint and r.duration_ms >= 0
    assert r.from_.startswith("busybox@") and r.to.startswith("busybox@")
    assert "/opt/data" in r.kept and "/root" in r.kept
    assert [(s.step, s.command, s.exit_code) for s in r.steps] == [(1, steps[0], 0), (2, steps[1], 0)]
    assert sb.generation == r.sandbox.generation > gen and sb.state == "running", "the handle takes the sandbox"

    out = client.exec(sb.name, "cat /root/setup.log /opt/data/db /root/two; test -e /etc/junk || echo junk gone")
    assert out.stdout_text == "ran\nran\ndb\nstep two\njunk gone\n"
    assert client.logs(sb.name, r.steps[1].run).read() == b"step two\n", "a step's output is its run's"

    # A failing step: Conflict naming it, and the sandbox as it was.
    client.set_setup(sb.name, steps=["echo boom; exit 3"])
    with pytest.raises(den.Conflict) as e:
        client.rebase(sb.name)
    assert "boom" in str(e.value) and "3" in str(e.value)
    back = client.get(sb.name)
    assert back.state == "running"
    assert client.exec(sb.name, "cat /opt/data/db /root/two").stdout_text == "db\nstep two\n"

    # Empty lists clear; the defaults stay kept.
    cleared = client.set_setup(sb.name, steps=[], keep=[])
    assert cleared.setup == [] and "/opt/data" not in cleared.keep and "/root" in cleared.keep

    # Undo: restoring the checkpoint the rebase took.
    client.restore(sb.name, r.checkpoint)
    assert client.exec(sb.name, "cat /etc/junk").stdout_text == "junk\n"


def test_rebase_refuses_bad_input(client, sb):
    with pytest.raises(den.NotFound):
        client.rebase("py-no-such-sandbox")
    with pytest.raises(den.NotFound):
        client.rebase(sb.name, image="py-no-such-image")
    with pytest.raises(den.NotFound):
        client.set_setup("py-no-such-sandbox", steps=["true"])
    with pytest.raises(den.Invalid):
        client.set_setup(sb.name, keep=["relative/path"])
    assert client.get(sb.name).keep == sb.keep
