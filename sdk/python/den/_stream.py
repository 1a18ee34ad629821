"""Streamed answers: file contents, archives and run output, read as they
come and never held whole."""

from __future__ import annotations

import http.client
import json
from typing import Iterator, Optional

from . import errors

_CHUNK = 64 << 10


class BodyReader:
    """A binary, file-like reader over a streamed answer from dend.

    ``read(n)`` and ``read1(n)`` as on a file; iterating yields chunks as
    they arrive. Close it (or use it as a context manager) when done early;
    reading to the end gives its connection back for reuse.
    """

    def __init__(self, transport, resp, what: str):
        self._t = transport
        self._resp = resp
        self._what = what
        self._done = False

    def readable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return self._resp is None

    def read(self, n: int = -1) -> bytes:
        """Read up to n bytes (all that is left when n < 0); b"" at the end."""
        if n is None or n < 0:
            return b"".join(iter(self))
        out = []
        while n > 0:
            b = self.read1(n)
            if not b:
                break
            out.append(b)
            n -= len(b)
        return b"".join(out)

    def read1(self, n: int = _CHUNK) -> bytes:
        """Read what has arrived, up to n bytes, waiting only for the first."""
        if self._resp is None or self._done:
            return b""
        if n is None or n < 0:
            n = _CHUNK
        try:
            b = self._resp.read1(n) if n else b""
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise self._broken(e) from None
        if not b and n:
            self._end()
        else:
            self._advance(b)
        return b

    def readinto(self, buf) -> int:
        b = self.read1(len(buf))
        buf[: len(b)] = b
        return len(b)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            b = self.read1(_CHUNK)
            if not b:
                return
            yield b

    def _advance(self, b: bytes) -> None:
        pass

    def _end(self) -> None:
        self._done = True
        self._finish()

    def _finish(self) -> None:
        resp, self._resp = self._resp, None
        if resp is not None:
            self._t.release(resp)

    def _broken(self, e: BaseException) -> errors.DenError:
        return errors.Unavailable(f"the connection to dend ended while reading {self._what} ({e})",
                                  "dend may have restarted: try again (reading changed nothing)")

    def close(self) -> None:
        """Stop reading; the connection is closed unless the body was read
        to its end."""
        self._finish()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LogReader(BodyReader):
    """One output stream of a run, from a byte offset.

    ``offset`` is the position in the stream reached so far. Without
    follow it ends at the output written so far. A followed stream ends
    once the run ended and all of its output was read (``ended`` is then
    True); when it stops short (the sandbox was put to sleep, the
    connection was cut) reading raises :class:`~den.errors.FollowError`,
    whose ``offset`` is where to resume.
    """

    def __init__(self, transport, resp, *, sandbox: str, run: str, stream: str, offset: int, follow: bool):
        super().__init__(transport, resp, f"the {stream} of run {run}")
        self.sandbox, self.run, self.stream, self.follow = sandbox, run, stream, follow
        try:
            self.offset = int(resp.getheader("Den-Log-Offset") or offset)
        except ValueError:
            self.offset = offset
        self.ended = False

    def _advance(self, b: bytes) -> None:
        self.offset += len(b)

    def _end(self) -> None:
        trailers = getattr(self._resp, "trailers", None)
        self._done = True
        self._finish()
        if not self.follow:
            return
        end = trailers.get("Den-Log-End", "") if trailers is not None else ""
        if end == "ended":
            self.ended = True
            return
        cause = {"code": "unavailable", "message": "the stream was cut", "hint": ""}
        if end:
            try:
                cause = json.loads(end)
            except ValueError:
                cause["message"] = end
        raise self._stopped(cause)

    def _broken(self, e: BaseException) -> errors.DenError:
        if not self.follow:
            return super()._broken(e)
        return self._stopped({"code": "unavailable", "message": str(e) or type(e).__name__})

    def _stopped(self, cause: dict) -> errors.FollowError:
        hint = cause.get("hint") or (
            f"the run may still be going: resume with logs({self.sandbox!r}, {self.run!r}, stream={self.stream!r}, "
            f"offset={self.offset}, follow=True), or `den logs {self.sandbox} {self.run} -f --stream {self.stream} --from {self.offset}`")
        return errors.FollowError(
            f"following the {self.stream} of run {self.run} stopped at byte {self.offset} before the run ended: "
            f"{cause.get('message', '')}", hint, run=self.run, stream=self.stream, offset=self.offset,
            code=cause.get("code") or "unavailable")


def exhaust(reader: Optional[BodyReader]) -> None:
    if reader is not None:
        for _ in reader:
            pass
