"""A dropped connection: the SDK asks dend again with the same
Idempotency-Key and reports the real outcome, or OutcomeUnknown.

The drop is made by a proxy between the SDK and the real dend: it passes a
request on whole, lets dend do it and answer, and then cuts the
connection instead of passing the answer back (as when dend restarts or a
network cuts out mid-call). Optionally it then stops listening, as a dend
that does not come back.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from urllib.parse import urlsplit

import pytest

import den

MUTATING = (b"POST ", b"PUT ", b"PATCH ", b"DELETE ")


class CuttingProxy:
    """Forwards connections to the dend under test; cuts the answer to the
    next `cuts` requests that change something."""

    def __init__(self, tmp_path):
        if os.environ.get("DEN_HOST"):
            u = urlsplit(os.environ["DEN_HOST"] if "://" in os.environ["DEN_HOST"] else "http://" + os.environ["DEN_HOST"])
            host, port = u.hostname, u.port or 80
            self.upstream = lambda: socket.create_connection((host, port))
            self.listener = socket.create_server(("127.0.0.1", 0))
            self.kwargs = {"host": "http://127.0.0.1:%d" % self.listener.getsockname()[1],
                           "token": os.environ.get("DEN_TOKEN")}
        else:
            path = os.environ["DEN_SOCKET"]

            def upstream():
                s = socket.socket(socket.AF_UNIX)
                s.connect(path)
                return s

            self.upstream = upstream
            self.path = str(tmp_path / "proxy.sock")
            self.listener = socket.socket(socket.AF_UNIX)
            self.listener.bind(self.path)
            self.listener.listen(16)
            self.kwargs = {"socket": self.path}
        self.cuts = 0
        self.stop_after_cut = False
        self.cut_done = threading.Event()
        self._mu = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def client(self, notices, reconnect=10.0):
        return den.Client(reconnect=reconnect, notice=notices.append, **self.kwargs)

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(down,), daemon=True).start()

    def _serve(self, down):
        up = self.upstream()
        state = {"cut": False}

        def pump_up():
            try:
                while True:
                    b = down.recv(65536)
                    if not b:
                        break
                    if b.startswith(MUTATING):
                        with self._mu:
                            if self.cuts > 0:
                                self.cuts -= 1
                                state["cut"] = True
                    up.sendall(b)
            except OSError:
                pass
            finally:
                try:
                    up.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        threading.Thread(target=pump_up, daemon=True).start()
        try:
            while True:
                b = up.recv(65536)
                if not b:
                    break
                if state["cut"]:
                    # dend has answered: drop the answer, and the connection.
                    if self.stop_after_cut:
                        self.close()
                    down.shutdown(socket.SHUT_RDWR)
                    self.cut_done.set()
                    break
                down.sendall(b)
        except OSError:
            pass
        finally:
            down.close()
            up.close()

    def close(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes accept, refuses connections
        except OSError:
            pass
        try:
            self.listener.close()
        finally:
            if getattr(self, "path", None) and os.path.exists(self.path):
                os.unlink(self.path)


@pytest.fixture
def proxy(tmp_path):
    p = CuttingProxy(tmp_path)
    yield p
    p.close()


def test_a_create_whose_answer_was_lost_is_not_done_twice(client, names, proxy):
    notices = []
    name = names()
    proxy.cuts = 1
    sb = proxy.client(notices).create(name, "busybox", memory="256M")
    assert proxy.cut_done.is_set() and sb.name == name and sb.state == "running"
    assert "asking it what became of the create" in notices[0] and "had completed" in notices[-1]
    assert [s.name for s in client.list()].count(name) == 1


def test_a_refusal_whose_answer_was_lost_is_still_a_refusal(client, sb, proxy):
    notices = []
    proxy.cuts = 1
    with pytest.raises(den.Conflict) as e:
        proxy.client(notices).create(sb.name, "busybox")
    assert "already in use" in e.value.message and e.value.hint
    assert proxy.cut_done.is_set() and "had failed" in notices[-1]


def test_a_streamed_upload_whose_answer_was_lost_asks_for_its_record(client, sb, proxy):
    notices = []
    proxy.cuts = 1
    data = [os.urandom(1 << 16) for _ in range(16)]
    proxy.client(notices).write_file(sb.name, "/root/streamed", iter(data))
    assert proxy.cut_done.is_set() and "had completed" in notices[-1]
    assert client.read_file(sb.name, "/root/streamed") == b"".join(data)


def test_dend_gone_is_outcome_unknown_with_the_key(client, sb, proxy):
    notices = []
    proxy.cuts, proxy.stop_after_cut = 1, True
    with pytest.raises(den.OutcomeUnknown) as e:
        proxy.client(notices, reconnect=1.0).pause(sb.name)
    err = e.value
    assert isinstance(err, den.Unavailable)
    assert "may or may not have happened" in err.message
    assert f"den inspect {sb.name}" in err.hint and f"GET /v1/requests/{err.key}" in err.hint
    # dend itself can tell: the pause was done.
    rec = client.request(err.key)
    assert (rec.state, rec.status, rec.method) == ("done", 200, "POST")
    assert rec.path.endswith(f"/{sb.name}/pause") and rec.response["state"] == "paused"
    assert client.get(sb.name).state == "paused"


def test_a_read_whose_answer_was_lost_says_it_changed_nothing(client, tmp_path):
    # A GET is never asked again: it is safe to send, and the caller is told.
    listener = socket.socket(socket.AF_UNIX)
    path = str(tmp_path / "hangup.sock")
    listener.bind(path)
    listener.listen(1)

    def hang_up():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    with pytest.raises(den.Unavailable) as e:
        den.Client(socket=path).list()
    assert "lost the connection" in e.value.message and "changed nothing" in e.value.hint
    assert not isinstance(e.value, den.OutcomeUnknown)
    listener.close()
    key = secrets.token_hex(4)
    with pytest.raises(den.NotFound):
        client.request(key)
