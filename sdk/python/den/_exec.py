"""Commands: attached over the exec WebSocket, detached, and their output.

The exec stream (api/stream.go) is a WebSocket at
GET /v1/sandboxes/{name}/exec/ws. The client sends one text message, the
ExecRequest as JSON; after that each binary message is a frame: one kind
byte, then the payload. dend sends 3 started (JSON Run), 1 stdout and 2
stderr (bytes), then exactly one of 4 exit (JSON Run, after every output
byte) or 5 error (JSON Error); the client sends 10 stdin, 11 stdin EOF,
12 resize (JSON) and 13 signal (JSON).
"""

from __future__ import annotations

import codecs
import io
import json
import threading
from typing import Any, Callable, Iterable, Iterator, Optional, Tuple, Union

from . import errors
from ._http import escape
from ._stream import LogReader
from ._wire import from_dict
from ._ws import OP_BINARY, Closed, WebSocket, WebSocketError
from .models import ExecResult, Run

FRAME_STDOUT = 1
FRAME_STDERR = 2
FRAME_STARTED = 3
FRAME_EXIT = 4
FRAME_ERROR = 5
FRAME_STDIN = 10
FRAME_STDIN_EOF = 11
FRAME_RESIZE = 12
FRAME_SIGNAL = 13

# How much stdin goes in one frame (dend takes messages up to 1 MiB).
_STDIN_CHUNK = 32 << 10

Argv = Union[str, Iterable[str]]
# Where output goes: a callable given each chunk, or a file (binary, or
# text: then decoded as UTF-8).
Sink = Union[Callable[[bytes], Any], Any]
# What stdin reads: bytes, a str (UTF-8), a file, or an iterable of chunks.
Source = Union[bytes, str, Any, Iterable[Union[bytes, str]]]


def argv_of(argv: Argv) -> list:
    """A command as argv: a str is a shell line (run with ``sh -c``)."""
    if isinstance(argv, str):
        return ["sh", "-c", argv]
    if argv is None:
        return []
    return list(argv)


def exec_request(argv: Argv, *, env=None, cwd=None, user=None, timeout=None, output_max=None,
                 tty=False, rows=None, cols=None, stdin=False, detach=False, labels=None) -> dict:
    """The JSON ExecRequest; absent values are left out for dend to fill."""
    req = {"argv": argv_of(argv), "env": env, "cwd": cwd, "user": user, "timeout": timeout,
           "output_max": output_max, "rows": rows, "cols": cols, "labels": labels or None}
    req = {k: v for k, v in req.items() if v is not None}
    if tty:
        req["tty"] = True
    if stdin:
        req["stdin"] = True
    if detach:
        req["detach"] = True
    return req


def _chunks(src: Source) -> Iterator[bytes]:
    """The chunks of a stdin source."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        b = bytes(src)
        for i in range(0, len(b), _STDIN_CHUNK):
            yield b[i:i + _STDIN_CHUNK]
        return
    if isinstance(src, str):
        yield from _chunks(src.encode("utf-8"))
        return
    if hasattr(src, "read"):
        while True:
            b = src.read(_STDIN_CHUNK)
            if not b:
                return
            yield b.encode("utf-8") if isinstance(b, str) else b
    for b in src:
        if b:
            yield from _chunks(b)


class _Output:
    """Delivers one output stream: to a callable, a file, or a buffer."""

    def __init__(self, sink: Optional[Sink]):
        self.buf = None
        self.decoder = None
        if sink is None:
            self.buf = bytearray()
            self.write = self.buf.extend
        elif isinstance(sink, io.TextIOBase):
            self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
            self.write = lambda b: (sink.write(self.decoder.decode(b)), sink.flush())
        elif hasattr(sink, "write"):
            self.write = sink.write
        elif callable(sink):
            self.write = sink
        else:
            raise TypeError(f"an output sink must be a callable or a file, not {type(sink).__name__}")

    def value(self) -> bytes:
        return bytes(self.buf) if self.buf is not None else b""


class ExecStream:
    """A command attached over the exec WebSocket.

    Iterate over it for its output as ``(stream, bytes)`` pairs, stream
    being ``"stdout"`` or ``"stderr"``; the iteration ends when the
    command has ended and all of its output was read, and ``result`` is
    then its final :class:`~den.models.Run`. Or call :meth:`wait`. Send
    stdin (for a stream opened with ``stdin=True``) with
    :meth:`write_stdin` and :meth:`close_stdin`, signals with
    :meth:`signal`, terminal sizes with :meth:`resize`. Closing the stream
    before the end leaves a command without a TTY running (readable
    through ``logs``); one with a TTY gets SIGHUP.

    Use it as a context manager so the connection is closed however the
    block ends.
    """

    def __init__(self, ws: WebSocket, sandbox: str, on_start: Optional[Callable[[Run], Any]] = None):
        self._ws = ws
        self.sandbox = sandbox
        self.started: Optional[Run] = None  # the run record, once it started
        self.result: Optional[Run] = None  # the final run record, once it ended
        self._on_start = on_start
        self._stdin_thread: Optional[threading.Thread] = None

    # -- sending ----------------------------------------------------------

    def _send(self, kind: int, payload: bytes = b"") -> None:
        try:
            self._ws.send_binary(bytes([kind]) + payload)
        except WebSocketError as e:
            raise self._broken("sending to the exec stream", e) from None

    def write_stdin(self, data: Union[bytes, str]) -> None:
        """Send bytes (or UTF-8 text) to the command's stdin."""
        for chunk in _chunks(data):
            self._send(FRAME_STDIN, chunk)

    def close_stdin(self) -> None:
        """Send end-of-file on the command's stdin."""
        self._send(FRAME_STDIN_EOF)

    def signal(self, signal: str) -> None:
        """Send a signal ("INT", "TERM", "KILL" or a number) to the command."""
        self._send(FRAME_SIGNAL, json.dumps({"signal": str(signal)}).encode())

    def resize(self, rows: int, cols: int) -> None:
        """Tell a TTY command its terminal's new size."""
        self._send(FRAME_RESIZE, json.dumps({"rows": rows, "cols": cols}).encode())

    def feed_stdin(self, src: Source) -> None:
        """Send src to stdin from a thread of its own, then end-of-file, so
        output keeps being read meanwhile (a command may not read all of
        its input before it writes)."""

        def run():
            try:
                for chunk in _chunks(src):
                    self._ws.send_binary(bytes([FRAME_STDIN]) + chunk)
                self._ws.send_binary(bytes([FRAME_STDIN_EOF]))
            except (WebSocketError, OSError):
                pass  # the command ended or the stream broke: the reader says which

        self._stdin_thread = threading.Thread(target=run, name="den-exec-stdin", daemon=True)
        self._stdin_thread.start()

    # -- receiving --------------------------------------------------------

    def __iter__(self) -> Iterator[Tuple[str, bytes]]:
        if self.result is not None:
            return
        while True:
            try:
                op, msg = self._ws.recv()
            except (Closed, WebSocketError) as e:
                raise self._broken("reading the exec stream", e) from None
            if op != OP_BINARY or not msg:
                continue
            kind, payload = msg[0], msg[1:]
            if kind == FRAME_STDOUT:
                yield "stdout", payload
            elif kind == FRAME_STDERR:
                yield "stderr", payload
            elif kind == FRAME_STARTED:
                self.started = from_dict(Run, _json(payload))
                if self._on_start is not None:
                    self._on_start(self.started)
            elif kind == FRAME_EXIT:
                self.result = from_dict(Run, _json(payload))
                self.close()
                return
            elif kind == FRAME_ERROR:
                self.close()
                raise errors.from_wire(_json(payload))

    def wait(self, stdout: Optional[Sink] = None, stderr: Optional[Sink] = None) -> ExecResult:
        """Read the stream to its end, passing output to stdout and stderr
        (callables or files; None captures it in the result)."""
        out, err = _Output(stdout), _Output(stderr)
        try:
            for stream, data in self:
                (out if stream == "stdout" else err).write(data)
        finally:
            self.close()
        return ExecResult(run=self.result, stdout=out.value(), stderr=err.value())

    def _broken(self, what: str, e: BaseException) -> errors.DenError:
        self._ws.abort()
        if self.started is not None:
            what += f" of run {self.started.id}"
        msg = f"{what}: the connection to dend ended before the command exited"
        if not isinstance(e, Closed) or e.code != 1000:
            msg += f" ({e})"
        return errors.Unavailable(msg, f"a command without a TTY keeps running: see `den runs {self.sandbox}` "
                                       f"and `den logs {self.sandbox} RUN`")

    def close(self) -> None:
        """Close the connection (politely once the command has ended)."""
        if self.result is not None:
            self._ws.close()
        else:
            self._ws.abort()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _json(payload: bytes) -> dict:
    try:
        v = json.loads(payload)
    except ValueError as e:
        raise errors.Internal(f"decoding an exec frame: {e}") from None
    return v if isinstance(v, dict) else {}


class ExecVerbs:
    """Commands and their output; mixed into :class:`den.Client`."""

    def exec_stream(self, sandbox: str, argv: Argv, *, stdin: bool = False, env: Optional[dict] = None,
                    cwd: Optional[str] = None, user: Optional[str] = None, timeout: Union[str, float, None] = None,
                    output_max: Optional[str] = None, tty: bool = False, rows: Optional[int] = None,
                    cols: Optional[int] = None, on_start: Optional[Callable[[Run], Any]] = None,
                    labels: Optional[dict] = None) -> ExecStream:
        """Run a command in a sandbox (`den exec`), attached: returns an
        :class:`ExecStream` to iterate over its output and send it stdin
        and signals. With ``stdin=True`` the command's stdin stays open
        until :meth:`ExecStream.close_stdin`. Other arguments are as for
        :meth:`exec`.
        """
        req = exec_request(argv, env=env, cwd=cwd, user=user, timeout=timeout, output_max=output_max,
                           tty=tty, rows=rows, cols=cols, stdin=stdin, labels=labels)
        sock, reader = self._t.upgrade(self._path(sandbox, "exec", "ws"))
        ws = WebSocket(sock, reader)
        stream = ExecStream(ws, sandbox, on_start)
        try:
            ws.send_text(json.dumps(req, separators=(",", ":")))
        except WebSocketError as e:
            raise stream._broken("sending the exec request", e) from None
        return stream

    def exec(self, sandbox: str, argv: Argv, *, stdin: Optional[Source] = None, stdout: Optional[Sink] = None,
             stderr: Optional[Sink] = None, env: Optional[dict] = None, cwd: Optional[str] = None,
             user: Optional[str] = None, timeout: Union[str, float, None] = None, output_max: Optional[str] = None,
             tty: bool = False, rows: Optional[int] = None, cols: Optional[int] = None,
             on_start: Optional[Callable[[Run], Any]] = None, labels: Optional[dict] = None) -> ExecResult:
        """Run a command in a sandbox (`den exec`) and wait for it to end.

        argv is a list of arguments, or a str run as a shell line
        (``sh -c``). stdin (bytes, str, a file or an iterable of chunks) is
        sent, then end-of-file. stdout and stderr are callables given each
        chunk as it comes, or files to write it to; a stream given neither
        is captured in the result. timeout ("30s", or seconds) kills the
        command and its children when it passes (status ``timed_out``).
        output_max ("1M") bounds how much of each stream dend keeps.
        on_start is called with the run record once the command started.
        labels tag the run; its record carries them.

        Returns an :class:`~den.models.ExecResult`: the final run
        (``exit_code``, ``status``) and the captured output. A command that
        fails is not an error; failing to run it is (:class:`~den.NotFound`
        for an unknown sandbox, :class:`~den.Invalid` for a bad request).
        """
        stream = self.exec_stream(sandbox, argv, stdin=stdin is not None, env=env, cwd=cwd, user=user,
                                  timeout=timeout, output_max=output_max, tty=tty, rows=rows, cols=cols,
                                  on_start=on_start, labels=labels)
        with stream:
            if stdin is not None:
                stream.feed_stdin(stdin)
            return stream.wait(stdout, stderr)

    def exec_detached(self, sandbox: str, argv: Argv, *, env: Optional[dict] = None, cwd: Optional[str] = None,
                      user: Optional[str] = None, timeout: Union[str, float, None] = None,
                      output_max: Optional[str] = None, labels: Optional[dict] = None) -> Run:
        """Run a command in the background (`den exec -d`) and return its
        run record at once. Read its output with :meth:`logs` and its end
        with :meth:`get_run`."""
        req = exec_request(argv, env=env, cwd=cwd, user=user, timeout=timeout, output_max=output_max, detach=True,
                           labels=labels)
        return from_dict(Run, self._t.call("POST", self._path(sandbox, "exec"), body=req))

    def runs(self, sandbox: str, limit: int = 0) -> list:
        """List the commands run in a sandbox, newest first (`den runs`);
        limit 0 for all."""
        q = {"limit": limit} if limit else None
        data = self._t.call("GET", self._path(sandbox, "runs"), query=q)
        return [from_dict(Run, r) for r in data.get("runs") or []]

    def get_run(self, sandbox: str, run: str) -> Run:
        """One run record."""
        return from_dict(Run, self._t.call("GET", self._path(sandbox, "runs", escape(run))))

    def logs(self, sandbox: str, run: str, *, stream: str = "stdout", offset: int = 0, follow: bool = False,
             wake: bool = True) -> LogReader:
        """Print the output of a run (`den logs`): a reader over one stream
        (``"stdout"`` or ``"stderr"``) from byte ``offset``. With follow it
        stays open until the run ends, waking a sleeping sandbox unless
        ``wake=False``; a follow that stops short raises
        :class:`~den.errors.FollowError` with the offset to resume from.
        Iterate over it for chunks, or ``read()`` it whole.
        """
        q = {"stream": stream, "from": offset or None, "follow": True if follow else None,
             "wake": False if (follow and not wake) else None}
        resp = self._t.send("GET", self._path(sandbox, "runs", escape(run), "logs"), query=q)
        return LogReader(self._t, resp, sandbox=sandbox, run=run, stream=stream, offset=offset, follow=follow)

    def signal(self, sandbox: str, run: str, signal: str = "TERM") -> None:
        """Send a signal ("TERM", "KILL", "INT" or a number) to a run."""
        self._t.call("POST", self._path(sandbox, "runs", escape(run), "signal"), body={"signal": str(signal)})
