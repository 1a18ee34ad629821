"""GET /v1/events: what happens to sandboxes, as it happens.

dend sends Server-Sent Events: one ``data:`` line of JSON per event (a
:class:`~den.models.StreamEvent`, its id inside), comment lines while
nothing happens. An :class:`EventStream` reads them as the Go SDK's
StreamEvents does: following, a connection cut short is opened again
after the last event received, and dend sends what was missed first (or
a ``gap`` event when it no longer keeps it).
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Optional

from . import errors
from ._retry import root_cause
from ._wire import from_dict
from .models import StreamEvent

# EventStream's after for every event dend keeps (its newest 4096).
OLDEST = "0"

_FIRST_BACKOFF = 0.1
_MAX_BACKOFF = 2.0


class EventStream:
    """An iterator over the events of GET /v1/events, in order.

    Without follow it ends once the events dend keeps were read; with
    follow it goes on until closed, opening the stream again after a cut
    (for up to the client's ``reconnect`` seconds, then raising
    :class:`~den.Unavailable`). ``last_id`` is the id of the last event
    read: ``client.stream_events(after=stream.last_id)`` resumes there.
    Close it (or use it as a context manager) when done.
    """

    def __init__(self, transport, sandbox: Optional[str], after: Optional[str], follow: bool):
        self._t = transport
        self.sandbox = sandbox
        self.follow = follow
        self.last_id = after or ""
        self._closed = False
        self._resp = self._open()

    def _open(self):
        q = {"sandbox": self.sandbox or None, "after": self.last_id or None, "follow": None if self.follow else False}
        return self._t.send("GET", "/events", query=q)

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> StreamEvent:
        while not self._closed:
            if self._resp is None:
                self._resp = self._reopen()
            ev = self._read_event()
            if ev is not None:
                if ev.id:
                    self.last_id = ev.id
                return ev
            # The stream ended: all there was, without follow; else cut.
            self._drop()
            if not self.follow:
                self._closed = True
        raise StopIteration

    def _read_event(self) -> Optional[StreamEvent]:
        """The next event, or None when the body ended (or broke, following)."""
        data: list = []
        while True:
            try:
                line = self._resp.readline()
            except (OSError, http.client.HTTPException, ValueError) as e:
                if self._closed:
                    return None
                if not self.follow:
                    self._drop()
                    raise self._t.lost_reading("GET", "/events", e) from None
                self._t.tell(f"the event stream from dend at {self._t.where} was cut ({root_cause(e)}); following again")
                return None
            if not line:
                return None
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                v = line[5:]
                data.append(v[1:] if v.startswith(b" ") else v)
            elif not line and data:
                try:
                    return from_dict(StreamEvent, json.loads(b"\n".join(data)))
                except ValueError as e:
                    raise errors.Internal(f"reading an event from dend: {e}") from None

    def _reopen(self):
        """Open the stream again after the last event read, until dend
        answers or the client's reconnect time passes."""
        if not self.last_id:
            self.last_id = OLDEST  # what happened while reconnecting
        deadline = time.monotonic() + self._t.reconnect_for
        delay = _FIRST_BACKOFF
        while True:
            try:
                resp = self._open()
            except errors.Unavailable as e:
                if time.monotonic() + delay > deadline:
                    raise errors.Unavailable(
                        f"following events stopped: dend at {self._t.where} did not come back within "
                        f"{self._t.reconnect_for:g}s ({e.message})",
                        f"resume once it is back with stream_events(..., after={self.last_id!r}, follow=True)") from None
                time.sleep(delay)
                delay = min(2 * delay, _MAX_BACKOFF)
                continue
            self._t.tell(f"following events from dend at {self._t.where} again, after {self.last_id}")
            return resp

    def _drop(self) -> None:
        resp, self._resp = self._resp, None
        if resp is not None:
            self._t.release(resp)

    def close(self) -> None:
        """Stop reading; the connection is closed."""
        self._closed = True
        resp, self._resp = self._resp, None
        if resp is not None:
            resp.close()
            conn = getattr(resp, "_den_conn", None)
            if conn is not None:
                resp._den_conn = None
                conn.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
