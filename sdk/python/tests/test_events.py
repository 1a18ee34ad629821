"""The event stream (GET /v1/events): what happens to sandboxes, as it
happens, resumable after any event's id."""

from __future__ import annotations

import datetime

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
