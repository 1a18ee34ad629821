"""HTTP to dend over its unix socket or over TCP, with http.client.

One :class:`Transport` per client keeps a small pool of idle keep-alive
connections. Every request that changes something carries a fresh
Idempotency-Key; when its connection drops after it was sent, the
transport asks dend again with that key (see :mod:`den._retry`). A request
that never reached dend (dend not running) fails at once with
:class:`~den.errors.Unavailable`: nothing happened.

The exec WebSocket starts as an HTTP request on a connection of its own;
:meth:`Transport.upgrade` hands over the socket once dend has switched
protocols.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import socket
import threading
from typing import Any, Callable, Optional
from urllib.parse import quote, urlencode, urlsplit

from . import errors
from ._retry import Reconnect, changes, new_key, root_cause

DEFAULT_SOCKET = "/run/den/den.sock"
DEFAULT_RECONNECT = 30.0
API_PREFIX = "/v1"

# How much of an error body is read, and how many idle connections are kept.
_MAX_ERROR_BODY = 64 << 10
_MAX_IDLE = 8
# How long to wait for a connection to dend to open.
_CONNECT_TIMEOUT = 10.0
# The chunk size of streamed request bodies.
_BLOCK = 64 << 10

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Response(http.client.HTTPResponse):
    """An HTTPResponse that keeps the trailer of a chunked body (http.client
    reads and discards it): dend ends a followed log stream with one."""

    trailers: Optional[http.client.HTTPMessage] = None

    def _read_and_discard_trailer(self):  # overrides http.client's
        self.trailers = http.client.parse_headers(self.fp)


class _UnixConnection(http.client.HTTPConnection):
    response_class = Response

    def __init__(self, path: str):
        super().__init__("den", timeout=_CONNECT_TIMEOUT, blocksize=_BLOCK)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
            s.settimeout(None)  # exec and log streams may be quiet for long
        except BaseException:
            s.close()
            raise
        self.sock = s


class _TCPConnection(http.client.HTTPConnection):
    response_class = Response

    def connect(self):
        super().connect()
        self.sock.settimeout(None)


class _TLSConnection(http.client.HTTPSConnection):
    response_class = Response

    def connect(self):
        super().connect()
        self.sock.settimeout(None)


class _NotSent(Exception):
    """The request never reached dend: the connection could not be opened."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


class _Lost(Exception):
    """The connection dropped after the request went out."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


_NET_ERRORS = (OSError, http.client.HTTPException)


class Transport(Reconnect):
    """Sends requests to one dend. Safe for use from several threads."""

    def __init__(self, socket_path: Optional[str] = None, host: Optional[str] = None,
                 token: Optional[str] = None, *, user_agent: str = "den-python",
                 reconnect: float = DEFAULT_RECONNECT, notice: Optional[Callable[[str], None]] = None):
        self.token = token or ""
        self.user_agent = user_agent
        self.reconnect_for = reconnect
        self.notice = notice
        self.socket_path = None
        self.scheme = "http"
        self.netloc = "den"
        self.base_path = ""
        if host:
            if "://" not in host:
                host = "http://" + host
            u = urlsplit(host)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise errors.Invalid(f"invalid dend host {host!r}", "want http://HOST:PORT or https://HOST:PORT")
            self.scheme, self.netloc, self.base_path = u.scheme, u.netloc, u.path.rstrip("/")
        else:
            self.socket_path = socket_path or DEFAULT_SOCKET
        self._idle: list = []
        self._mu = threading.Lock()

    # -- connections ------------------------------------------------------

    @property
    def where(self) -> str:
        """dend's address, for messages."""
        return self.socket_path or self.netloc

    def base_url(self) -> str:
        """The URL dend is reached at over TCP ("" over the unix socket)."""
        if self.socket_path:
            return ""
        return f"{self.scheme}://{self.netloc}{self.base_path}"

    def _new_conn(self) -> http.client.HTTPConnection:
        if self.socket_path:
            return _UnixConnection(self.socket_path)
        cls = _TLSConnection if self.scheme == "https" else _TCPConnection
        return cls(self.netloc, timeout=_CONNECT_TIMEOUT, blocksize=_BLOCK)

    def _take_idle(self) -> Optional[http.client.HTTPConnection]:
        with self._mu:
            return self._idle.pop() if self._idle else None

    def release(self, resp: Any) -> None:
        """Give back the connection of a response: to the pool when its body
        was read to the end, else closed."""
        conn = getattr(resp, "_den_conn", None)
        if conn is None:
            return
        resp._den_conn = None
        if not resp.isclosed() and getattr(resp, "length", None) == 0:
            resp.close()  # read to its end; http.client notices only on the next read
        if resp.isclosed() and not resp.will_close:
            with self._mu:
                if len(self._idle) < _MAX_IDLE:
                    self._idle.append(conn)
                    return
        resp.close()
        conn.close()

    def close(self) -> None:
        """Close the idle connections."""
        with self._mu:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    # -- requests ---------------------------------------------------------

    def url(self, path: str, query: Optional[dict] = None) -> str:
        """The request target of path (already escaped, under /v1)."""
        u = self.base_path + API_PREFIX + path
        if query:
            u += "?" + urlencode({k: _query_value(v) for k, v in query.items() if v is not None})
        return u

    def headers(self) -> dict:
        h = {"User-Agent": self.user_agent}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def roundtrip(self, method: str, target: str, body: Any, headers: dict, *, fresh: bool = False) -> Response:
        """Send one request and read the head of its answer. A pooled
        connection dend closed meanwhile is replaced once; errors are
        _NotSent (never sent) or _Lost (sent, then dropped)."""
        conn = None if fresh else self._take_idle()
        reused = conn is not None
        if conn is None:
            conn = self._new_conn()
            try:
                conn.connect()
            except OSError as e:
                conn.close()
                raise _NotSent(e) from e
        try:
            try:
                conn.request(method, target, body=body, headers=headers)
            except OSError:
                # dend may have answered before it read the whole body (a
                # 413, say) and closed: its answer is then still to be read.
                resp = conn.getresponse()
                resp.will_close = True
            else:
                resp = conn.getresponse()
        except _NET_ERRORS as e:
            conn.close()
            if reused:
                # Most likely dend closed it while it was idle, and nothing
                # was done; the same request again (with the same key) is
                # safe either way. If dend cannot be reached now, though,
                # it may have gone down with the request.
                try:
                    return self.roundtrip(method, target, body, headers, fresh=True)
                except _NotSent:
                    raise _Lost(e) from e
            raise _Lost(e) from e
        resp._den_conn = conn
        return resp

    def send(self, method: str, path: str, *, query: Optional[dict] = None, body: Any = None,
             content_type: Optional[str] = None, headers: Optional[dict] = None) -> Response:
        """Perform a request and return its answer when its status is 2xx
        (the caller reads it and calls :meth:`release`); other statuses
        raise the :class:`~den.errors.DenError` of dend's error body.

        body is bytes (sent again as it is if the connection drops) or a
        stream: a binary file object or an iterable of bytes, sent chunked
        as it is read. headers are added to the request's own.
        """
        target = self.url(path, query)
        headers = {**self.headers(), **(headers or {})}
        if content_type:
            headers["Content-Type"] = content_type
        key = None
        if changes(method):
            key = new_key()
            headers["Idempotency-Key"] = key
        replayable = body is None or isinstance(body, (bytes, bytearray))
        try:
            resp = self.roundtrip(method, target, body, headers, fresh=not replayable)
        except _NotSent as e:
            raise self.conn_error(e.cause) from None
        except _Lost as e:
            if key is None:
                raise self.lost_reading(method, path, e.cause) from None
            resp = self.reconnect(method, path, target, body if replayable else None, headers, key, e.cause,
                                  streamed=not replayable)
        if resp.status // 100 != 2:
            err = self.decode_error(resp)
            self.release(resp)
            raise err
        return resp

    def call(self, method: str, path: str, *, query: Optional[dict] = None, body: Any = None) -> Any:
        """A JSON call: body (when not None) is sent as JSON; the decoded
        JSON answer is returned (None for an empty one)."""
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
        resp = self.send(method, path, query=query, body=data,
                         content_type="application/json" if data is not None else None)
        try:
            raw = resp.read()
        except _NET_ERRORS as e:
            resp.close()
            raise self.lost_reading(method, path, e) from None
        finally:
            self.release(resp)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise errors.Internal(f"decoding the answer to {method} {path}: {e}") from None

    # -- the exec WebSocket -----------------------------------------------

    def upgrade(self, path: str):
        """Open a WebSocket at path: returns the socket and a buffered
        reader over it once dend has switched protocols."""
        conn = self._new_conn()
        try:
            conn.connect()
        except OSError as e:
            conn.close()
            raise self.conn_error(e) from None
        ws_key = base64.b64encode(os.urandom(16)).decode()
        headers = self.headers()
        headers.update({"Upgrade": "websocket", "Connection": "Upgrade",
                        "Sec-WebSocket-Key": ws_key, "Sec-WebSocket-Version": "13"})
        try:
            conn.request("GET", self.url(path), headers=headers)
            resp = conn.getresponse()
        except _NET_ERRORS as e:
            conn.close()
            raise self.lost_reading("GET", path, e) from None
        if resp.status != 101:
            err = self.decode_error(resp)
            conn.close()
            raise err
        want = base64.b64encode(hashlib.sha1((ws_key + _WS_GUID).encode()).digest()).decode()
        if (resp.getheader("Upgrade", "").lower() != "websocket"
                or resp.getheader("Sec-WebSocket-Accept", "") != want):
            conn.close()
            raise errors.Unavailable("dend answered the exec WebSocket handshake wrongly",
                                     "is DEN_HOST pointing at dend, and not at a proxy that does not pass WebSockets?")
        # Take the socket over: http.client must neither reuse nor close it.
        sock, reader = conn.sock, resp.fp
        conn.sock, resp.fp = None, None
        return sock, reader

    # -- errors -----------------------------------------------------------

    def decode_error(self, resp: Any) -> errors.DenError:
        """The exception for a non-2xx answer, from dend's error body or,
        when it is not one, from the status."""
        try:
            body = resp.read(_MAX_ERROR_BODY)
        except _NET_ERRORS:
            body = b""
        status = resp.status
        try:
            env = json.loads(body)
        except ValueError:
            env = None
        if isinstance(env, dict) and isinstance(env.get("error"), dict) and env["error"].get("message"):
            return errors.from_wire(env["error"], status)
        msg = f"{(resp.reason or 'error').lower()} (HTTP {status})"
        text = body.decode("utf-8", "replace").strip()
        if text and len(text) < 200 and "<" not in text and "{" not in text:
            msg += ": " + text
        hint = "set DEN_TOKEN to a token dend accepts" if status == 401 else ""
        return errors.from_wire({"code": errors.code_for_status(status), "message": msg, "hint": hint}, status)

    def conn_error(self, cause: BaseException) -> errors.Unavailable:
        """dend could not be reached at all: nothing happened."""
        if self.socket_path:
            hint = "is dend running? start it with `make run`, or point DEN_SOCKET at its socket"
            if isinstance(cause, PermissionError):
                hint = "the socket is only for root: run as root (e.g. with sudo)"
        else:
            hint = "is dend listening there? check DEN_HOST, or use the local socket"
        return errors.Unavailable(f"cannot connect to dend at {self.where}: {root_cause(cause)}", hint)

    def lost_reading(self, method: str, path: str, cause: BaseException) -> errors.Unavailable:
        """The connection dropped during a request that changes nothing."""
        return errors.Unavailable(
            f"lost the connection to dend at {self.where} during {method} {API_PREFIX}{path} ({root_cause(cause)})",
            "dend may have restarted: try again (this changed nothing); if it keeps failing, check that dend is running")


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def escape(segment: Any) -> str:
    """One path segment, escaped."""
    return quote(str(segment), safe="")
