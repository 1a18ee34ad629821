"""den's errors as exceptions.

Every error dend reports is a :class:`DenError` carrying the wire error's
``code``, ``message`` and ``hint`` (how to fix it) and the HTTP ``status``.
Each code has its own subclass, so callers catch what they can handle::

    try:
        client.get("web")
    except den.NotFound as e:
        print(e.message, "--", e.hint)

``str(err)`` is the message followed by the hint, as the CLI shows it.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "DenError",
    "Invalid",
    "Unauthorized",
    "Forbidden",
    "QuotaExceeded",
    "NotFound",
    "Conflict",
    "TooLarge",
    "Unavailable",
    "Internal",
    "OutcomeUnknown",
    "FollowError",
]


class DenError(Exception):
    """An error reported by dend, or a failure to reach it.

    Attributes:
        code: the API error code (``"not_found"``, ``"conflict"``, ...).
        message: what went wrong, without the hint.
        hint: how to fix it, or ``""``.
        status: the HTTP status, or ``None`` when the error arrived in-band
            (an exec stream's error frame) or dend could not be reached.
        key: the Idempotency-Key of the request the error is about, when it
            came of a lost connection (see :class:`OutcomeUnknown`), else
            ``None``.
    """

    code = "internal"

    def __init__(self, message: str, hint: str = "", *, code: Optional[str] = None,
                 status: Optional[int] = None, key: Optional[str] = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.hint = hint or ""
        self.status = status
        self.key = key

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (hint: {self.hint})"
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, hint={self.hint!r}, status={self.status!r})"


class Invalid(DenError):
    """400: the request is malformed or a value is out of range."""

    code = "invalid"


class Unauthorized(DenError):
    """401: the token is missing, wrong, expired or revoked."""

    code = "unauthorized"


class Forbidden(DenError):
    """403: the token is valid but its scope does not allow the call."""

    code = "forbidden"


class QuotaExceeded(DenError):
    """403: the owner's quota has no room for it; the message names the
    quota, its use and its limit."""

    code = "quota_exceeded"


class NotFound(DenError):
    """404: no such sandbox, checkpoint, run, image or file (or one another
    owner holds: to an owner token those do not exist)."""

    code = "not_found"


class Conflict(DenError):
    """409: the name is taken, the sandbox is in the wrong state, or a
    checkpoint is still needed."""

    code = "conflict"


class TooLarge(DenError):
    """413: the body is over the limit."""

    code = "too_large"


class Unavailable(DenError):
    """503 (and 502): den or the sandbox cannot serve this right now, or
    dend cannot be reached at all."""

    code = "unavailable"


class Internal(DenError):
    """500: a bug or a host failure; the details are in dend's log."""

    code = "internal"


class OutcomeUnknown(DenError):
    """A request that changes something lost its connection to dend, and
    dend could not tell whether it took effect: it stopped mid-way, or
    never came back. The hint says what to check; ``key`` is the request's
    Idempotency-Key, for :meth:`den.Client.request`.

    It is raised as a subclass that is also the class of its code
    (:class:`Unavailable` when dend never answered, :class:`Conflict`
    when dend was interrupted), as the Go SDK's errors match both.
    """


class _LostOutcome(OutcomeUnknown, Unavailable):
    """dend never answered again: :class:`OutcomeUnknown` and :class:`Unavailable`."""


class _InterruptedOutcome(OutcomeUnknown, Conflict):
    """dend stopped while it ran the request: :class:`OutcomeUnknown` and :class:`Conflict`."""


class FollowError(DenError):
    """A followed log stream stopped before its run ended: the sandbox was
    put to sleep, or the connection to dend was cut. ``offset`` is where
    to resume (``client.logs(..., offset=err.offset, follow=True)``); the
    code is that of the error that stopped it."""

    def __init__(self, message: str, hint: str = "", *, run: str, stream: str, offset: int,
                 code: str = "unavailable", status: Optional[int] = None):
        super().__init__(message, hint, code=code, status=status)
        self.run = run
        self.stream = stream
        self.offset = offset


_BY_CODE = {
    cls.code: cls
    for cls in (Invalid, Unauthorized, Forbidden, QuotaExceeded, NotFound, Conflict, TooLarge, Unavailable, Internal)
}

_CODE_BY_STATUS = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "invalid",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}

_STATUS_BY_CODE = {
    "invalid": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "quota_exceeded": 403,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "unavailable": 503,
    "internal": 500,
}


def code_for_status(status: int) -> str:
    """The API error code that goes with an HTTP status."""
    return _CODE_BY_STATUS.get(status, "internal")


def from_wire(body: Optional[dict], status: Optional[int] = None, key: Optional[str] = None) -> DenError:
    """Build the exception for a wire error ``{"code", "message", "hint"}``.

    ``status`` is the HTTP status it came with; for in-band errors it is
    ``None`` and derived from the code.
    """
    body = body if isinstance(body, dict) else {}
    code = body.get("code") or (code_for_status(status) if status else "internal")
    message = body.get("message") or "dend reported an error without details"
    cls = _BY_CODE.get(code, DenError)
    if status is None:
        status = _STATUS_BY_CODE.get(code)
    return cls(message, body.get("hint") or "", code=code, status=status, key=key)
