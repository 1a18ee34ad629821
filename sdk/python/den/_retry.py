"""A lost connection, as the Go SDK's retry.go handles it.

Every request that changes something carries a fresh Idempotency-Key, so
dend runs it at most once and keeps its answer. When the connection drops
after the request went out (dend killed or restarted mid-call, a proxy
cut), the client does not guess: it sends the same request with the same
key again, with backoff, until dend answers or ``reconnect`` seconds pass.
dend's answer is then the real outcome: the recorded answer if it was
done; "still running" (wait more); "interrupted" if dend stopped while it
ran, which becomes :class:`~den.errors.OutcomeUnknown` saying it may or may
not have happened and what to check. A request whose body was a stream
cannot be sent again: the client asks GET /v1/requests/{key} instead. A
request never sent (dend not running) fails at once, as nothing happened.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import unquote

from . import errors

log = logging.getLogger("den")

_FIRST_BACKOFF = 0.1
_MAX_BACKOFF = 2.0


def changes(method: str) -> bool:
    """Whether a method changes something, and so carries a key."""
    return method in ("POST", "PUT", "PATCH", "DELETE")


def new_key() -> str:
    """A fresh idempotency key: 128 random bits."""
    return secrets.token_hex(16)


def root_cause(err: BaseException) -> str:
    """The system's words for a network error, e.g. "connection refused"."""
    while err.__cause__ is not None:
        err = err.__cause__
    if isinstance(err, OSError) and err.strerror:
        return err.strerror[0].lower() + err.strerror[1:]
    return str(err) or type(err).__name__


class _StillRunning(Exception):
    def __str__(self):
        return "dend is still working on it"


class _NeverStarted(Exception):
    pass


@dataclass
class Operation:
    """A request in words, for messages."""

    doing: str  # "restoring sandbox s4"
    noun: str  # "the restore"
    check: str = ""  # "den inspect s4": how to see whether it happened
    sandbox: str = ""  # "s4", when about one


# The POSTs to /sandboxes/{name}/VERB: what doing it is called, and what it
# is called once done.
_SANDBOX_VERBS = {
    "start": ("starting", "the start"),
    "stop": ("stopping", "the stop"),
    "pause": ("pausing", "the pause"),
    "resume": ("resuming", "the resume"),
    "hibernate": ("hibernating", "the hibernation"),
    "recover": ("recovering", "the recovery"),
    "restore": ("restoring", "the restore"),
    "fork": ("forking", "the fork"),
    "rebase": ("rebasing", "the rebase"),
    "checkpoints": ("checkpointing", "the checkpoint"),
}


def describe(method: str, path: str) -> Operation:
    """Put a request in words; path is under /v1."""
    parts = path.strip("/").split("/")
    if parts[0] != "sandboxes":
        return Operation(doing=f"sending {method} /v1{path}", noun="the request")
    if len(parts) == 1:
        return Operation(doing="creating a sandbox", noun="the create", check="den ls")
    name = unquote(parts[1])
    op = Operation(doing=f"sending {method} /v1{path} for sandbox {name}", noun="the request",
                   check=f"den inspect {name}", sandbox=name)
    if len(parts) == 2 and method == "DELETE":
        op.doing, op.noun = f"removing sandbox {name}", "the removal"
    elif len(parts) == 3 and method == "POST" and parts[2] == "exec":
        op.doing, op.noun, op.check = f"starting a command in sandbox {name}", "the command", f"den runs {name}"
    elif len(parts) == 3 and method == "POST" and parts[2] in _SANDBOX_VERBS:
        doing, noun = _SANDBOX_VERBS[parts[2]]
        op.doing, op.noun = f"{doing} sandbox {name}", noun
    elif len(parts) == 3 and method in ("PUT", "PATCH"):
        op.doing, op.noun = f"changing the {parts[2]} of sandbox {name}", "the change"
    return op


def check_hint(op: Operation, key: str) -> str:
    if op.check:
        return f"check with `{op.check}`; dend keeps what became of it for a day: GET /v1/requests/{key}"
    return f"ask dend what became of it: GET /v1/requests/{key} (kept a day)"


class Recorded:
    """The answer a request had, rebuilt from dend's record of it: enough
    of an HTTP response for the transport's callers."""

    will_close = True

    def __init__(self, status: int, headers: dict, body: bytes):
        self.status = status
        self.reason = ""
        self._headers = {k.lower(): v for k, v in headers.items()}
        self._body = io.BytesIO(body)

    def getheader(self, name: str, default: Any = None) -> Any:
        return self._headers.get(name.lower(), default)

    def read(self, n: int = -1) -> bytes:
        return self._body.read(n)

    read1 = read

    def isclosed(self) -> bool:
        return True

    def close(self) -> None:
        pass


class Reconnect:
    """The part of the transport that learns what became of a request
    whose connection dropped. Expects the transport's roundtrip, url,
    headers, release, decode_error, where and call."""

    reconnect_for: float
    notice: Any

    def tell(self, msg: str) -> None:
        log.warning("%s", msg)
        if self.notice is not None:
            self.notice(msg)

    def reconnect(self, method: str, path: str, target: str, body: Optional[bytes], headers: dict,
                  key: str, cause: BaseException, *, streamed: bool = False):
        """Learn the outcome of a request whose connection dropped with
        cause, by sending it again with the same key until dend answers."""
        from ._http import _Lost, _NotSent  # the transport's own errors

        op = describe(method, path)
        self.tell(f"lost the connection to dend while {op.doing} ({root_cause(cause)}); asking it what became of {op.noun}")
        deadline = time.monotonic() + self.reconnect_for
        last: BaseException = cause
        delay = _FIRST_BACKOFF
        while True:
            if time.monotonic() + delay > deadline:
                raise self.lost(op, key, last)
            time.sleep(delay)
            delay = min(2 * delay, _MAX_BACKOFF)
            try:
                if streamed:
                    resp = self.recorded(key)
                else:
                    resp = self.roundtrip(method, target, body, headers, fresh=True)
            except _NeverStarted:
                raise errors.Unavailable(
                    f"lost the connection to dend while {op.doing}; dend came back with no record of it, so {op.noun} never started",
                    "send it again", key=key) from None
            except _StillRunning as e:
                last = e
                continue
            except (_NotSent, _Lost) as e:
                last = e.cause
                continue
            except errors.DenError:
                self.tell(f"lost the connection to dend while {op.doing}; it came back and {op.noun} had failed")
                raise
            status = resp.getheader("Idempotency-Status", "")
            if status == "in-progress":
                resp.read()
                self.release(resp)
                last = _StillRunning()
                continue
            if status == "interrupted":
                self.decode_error(resp)
                self.release(resp)
                raise self.interrupted(op, key, self.state_of(op.sandbox))
            if resp.status // 100 == 2:
                self.tell(f"lost the connection to dend while {op.doing}; it came back and {op.noun} had completed")
            elif status == "not-kept":
                # Done, but its answer (a new token's secret) was not kept:
                # the error that follows says what to do instead.
                self.tell(f"lost the connection to dend while {op.doing}; it came back and {op.noun} had completed, "
                          "but its answer was not kept")
            else:
                self.tell(f"lost the connection to dend while {op.doing}; it came back and {op.noun} had failed")
            return resp

    def recorded(self, key: str) -> Recorded:
        """Ask dend what became of the request of key, and rebuild the
        answer it had."""
        resp = self.roundtrip("GET", self.url(f"/requests/{key}"), None, self.headers())
        try:
            if resp.status == 404:
                raise _NeverStarted()
            if resp.status != 200:
                raise self.decode_error(resp)
            st = json.loads(resp.read())
        finally:
            self.release(resp)
        state = st.get("state")
        if state == "in_progress":
            raise _StillRunning()
        headers = {"Content-Type": "application/json", "Idempotency-Status": "replayed"}
        status = st.get("status") or 200
        body = b""
        if st.get("response") is not None:
            body = json.dumps(st["response"]).encode()
        if st.get("error"):
            body = json.dumps({"error": st["error"]}).encode()
        if state == "interrupted":
            headers["Idempotency-Status"] = "interrupted"
            status = 409
            body = json.dumps({"error": {"code": "conflict", "message": "interrupted", "hint": st.get("hint", "")}}).encode()
        return Recorded(status, headers, body)

    def state_of(self, name: str) -> str:
        """The state of sandbox name now, or "" when it cannot be told."""
        if not name:
            return ""
        try:
            from ._http import escape

            return self.call("GET", "/sandboxes/" + escape(name)).get("state", "")
        except Exception:  # dend not answering, no such sandbox: unknown
            return ""

    def lost(self, op: Operation, key: str, cause: BaseException) -> errors.OutcomeUnknown:
        """The error of a request whose connection dropped and whose
        outcome dend never told."""
        if isinstance(cause, _StillRunning):
            msg = (f"lost the connection to dend while {op.doing}; it came back but is still working on it, "
                   f"so {op.noun} may or may not happen")
        else:
            msg = (f"lost the connection to dend while {op.doing}, and dend is not answering at {self.where} "
                   f"({root_cause(cause)}): {op.noun} may or may not have happened")
        return errors._LostOutcome(msg, check_hint(op, key), key=key)

    def interrupted(self, op: Operation, key: str, state: str) -> errors.OutcomeUnknown:
        """The error of a request dend stopped in the middle of."""
        msg = (f"lost the connection to dend while {op.doing}, and dend was interrupted before it finished: "
               f"{op.noun} may or may not have happened")
        if state:
            msg += f" (sandbox {op.sandbox} is now {state})"
        return errors._InterruptedOutcome(msg, check_hint(op, key), status=409, key=key)
