"""The event stream (GET /v1/events): what happens to sandboxes, as it
happens, resumable after any event's id."""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import threading
from urllib.parse import urlsplit

import pytest

import den


def until(events, kind: str, limit: int = 200) -> list:
    """The events read up to and including the first of type kind."""
    seen = []
    for ev in events:
        if ev.type == "gap":
            continue
        seen.append(ev)
        if ev.type == kind or len(seen) >= limit:
            break
    assert seen and seen[-1].type == kind, f"no {kind} event in {[e.type for e in seen]}"
    return seen


def test_a_pause_arrives_and_the_stream_resumes_after_it(client, sb):
    client.pause(sb.name)
    with client.stream_events(sb.name, after="0") as events:
        seen = until(events, "paused")
        assert events.last_id == seen[-1].id
    paused = seen[-1]
    assert isinstance(paused, den.StreamEvent)
    assert (paused.sandbox, paused.sandbox_id, paused.from_, paused.to) == (sb.name, sb.id, "running", "paused")
    assert paused.id and isinstance(paused.time, datetime.datetime) and paused.generation == sb.generation
    assert "created" in [e.type for e in seen], "after 0 starts from the oldest event dend keeps"
    assert {e.sandbox_id for e in seen} == {sb.id}, "another sandbox's events came through"

    client.resume(sb.name)
    later = [e for e in client.stream_events(sb.name, after=paused.id, follow=False) if e.type != "gap"]
    kinds = [e.type for e in later]
    assert kinds and kinds[0] == "resumed" and "paused" not in kinds, kinds
    assert (later[0].from_, later[0].to) == ("paused", "running")


def test_following_from_now_sees_a_run_start_and_end(client, sb):
    with client.stream_events(sb.name) as events:  # from now: the stream is open before the run
        r = client.exec(sb.name, "echo hi")
        seen = until(events, "run.ended")
    kinds = [e.type for e in seen]
    assert "created" not in kinds and "run.started" in kinds, kinds
    ended = seen[-1]
    assert ended.run_id == r.run.id and ended.run_status == "exited" and ended.exit_code == 0


def test_stream_events_refuses_bad_input(client):
    with pytest.raises(den.NotFound) as e:
        client.stream_events("py-no-such-sandbox")
    assert e.value.status == 404
    with pytest.raises(den.Invalid):
        client.stream_events(after="not-an-id")


class Relay:
    """Passes connections on to the dend under test until cut() cuts every
    one open, as a restart or a network would."""

    def __init__(self, tmp_path):
        if os.environ.get("DEN_HOST"):
            u = urlsplit(os.environ["DEN_HOST"] if "://" in os.environ["DEN_HOST"] else "http://" + os.environ["DEN_HOST"])
            self.upstream = lambda: socket.create_connection((u.hostname, u.port or 80))
            self.listener = socket.create_server(("127.0.0.1", 0))
            self.kwargs = {"host": "http://127.0.0.1:%d" % self.listener.getsockname()[1], "token": os.environ.get("DEN_TOKEN")}
        else:
            def upstream():
                s = socket.socket(socket.AF_UNIX)
                s.connect(os.environ["DEN_SOCKET"])
                return s

            self.upstream = upstream
            self.listener = socket.socket(socket.AF_UNIX)
            self.listener.bind(str(tmp_path / "relay.sock"))
            self.listener.listen(16)
            self.kwargs = {"socket": str(tmp_path / "relay.sock")}
        self.open: list = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = self.upstream()
            self.open += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self):
        for s in self.open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self):
        self.cut()
        self.listener.close()


def test_a_cut_stream_follows_again_after_the_last_event(client, sb, tmp_path):
    relay = Relay(tmp_path)
    notices: list = []
    try:
        with den.Client(reconnect=10, notice=notices.append, **relay.kwargs) as c:
            with c.stream_events(sb.name, after="0") as events:
                before = until(events, "started")
                relay.cut()
                client.pause(sb.name)  # while the stream is down
                after = until(events, "paused")
    finally:
        relay.close()
    ids = [e.id for e in before + after]
    assert len(ids) == len(set(ids)), f"events came twice: {[e.type for e in before + after]}"
    assert "created" not in [e.type for e in after], "it followed again from the start, not after the last event"
    assert any(n.startswith("following events from dend") and "again, after" in n for n in notices), notices
