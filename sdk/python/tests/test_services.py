"""Services: long-lived processes den keeps running in a sandbox."""

from __future__ import annotations

import time

import pytest

import den


def wait_service(client, sandbox, name, cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        s = next(s for s in client.services(sandbox) if s.name == name)
        if cond(s):
            return s
        assert time.monotonic() < deadline, f"service {name}: {s}"
        time.sleep(0.1)


def test_service_runs_restarts_and_goes(client, sb):
    s = sb.add_service("tick", ["sh", "-c", "echo hi; exec sleep 100000"], env={"A": "1"})
    assert isinstance(s, den.Service) and s.name == "tick" and s.restart == "always" and s.env == {"A": "1"}
    s = wait_service(client, sb.name, "tick", lambda s: s.state == "running" and s.run_id)
    assert s.pid > 0 and s.restarts == 0 and s.started_at is not None
    run = client.get_run(sb.name, s.run_id)
    assert run.labels == {"service": "tick"}

    client.restart_service(sb.name, "tick")
    again = wait_service(client, sb.name, "tick", lambda n: n.restarts == 1 and n.state == "running" and n.run_id)
    assert again.pid != s.pid and again.run_id != s.run_id
    assert again.last_exit is not None and again.last_exit.signal == "TERM"

    client.remove_service(sb.name, "tick")
    assert client.services(sb.name) == []


def test_services_refuse_bad_input(client, sb):
    with pytest.raises(den.NotFound):
        client.services("py-no-such-sandbox")
    with pytest.raises(den.Invalid):
        client.add_service(sb.name, "Bad Name", ["true"])
    with pytest.raises(den.Invalid):
        client.add_service(sb.name, "x", [])
    with pytest.raises(den.Invalid):
        client.add_service(sb.name, "x", ["true"], restart="sometimes")
    with pytest.raises(den.Invalid):
        client.add_service(sb.name, "x", ["true"], ready_port=70000)
    with pytest.raises(den.NotFound):
        client.remove_service(sb.name, "ghost")
    client.add_service(sb.name, "one", ["sleep", "100000"])
    with pytest.raises(den.Conflict):
        client.add_service(sb.name, "one", ["sleep", "1"])
    assert [s.name for s in client.services(sb.name)] == ["one"]
