"""The SDK's tests run against a real dend, reached as the environment says:

- DEN_SOCKET, or DEN_HOST and DEN_TOKEN: the dend under test and the
  caller the tests act as (root on the socket is an admin; an owner token
  over TCP sees only its own sandboxes).
- DEN_TEST_TCP and DEN_TEST_OWNER_TOKENS ("TOKEN_A,TOKEN_B"): the same
  dend's TCP listener and two owner tokens, for owner isolation.
- DEN_TEST_REVOKED_TOKEN, DEN_TEST_EXPIRED_TOKEN: tokens dend refuses.
- DEN_TEST_CLI: the den CLI, to check the README's verbs against its help.
- DEN_TEST_STRICT=1: a test that lacks what it needs fails instead of
  skipping (integration/python_test.go sets it).

Every sandbox a test makes is busybox with 256M, named py-<test>-<random>,
and removed when the test ends.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import den  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def need(var: str) -> str:
    """The value of an environment variable a test needs: absent, the test
    is skipped, or fails under DEN_TEST_STRICT."""
    v = os.environ.get(var, "")
    if not v:
        missing(f"{var} is not set")
    return v


def missing(why: str) -> None:
    if os.environ.get("DEN_TEST_STRICT"):
        pytest.fail(f"cannot run this test: {why}")
    pytest.skip(why)


@pytest.fixture(scope="session")
def client():
    if not (os.environ.get("DEN_SOCKET") or os.environ.get("DEN_HOST")):
        missing("set DEN_SOCKET, or DEN_HOST and DEN_TOKEN, to a dend to test against")
    c = den.Client.from_env()
    c.health()
    yield c
    c.close()


@pytest.fixture(scope="session")
def is_admin(client):
    """Whether the caller is an admin (root on the socket, or an admin token)."""
    try:
        client.list_secrets()
        return True
    except den.Forbidden:
        return False


@pytest.fixture
def names(request, client):
    """A maker of fresh sandbox names; every sandbox made under them is
    removed when the test ends."""
    base = "py-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:30].strip("-")
    made = []

    def make(suffix: str = "") -> str:
        n = f"{base}-{secrets.token_hex(3)}{'-' + suffix if suffix else ''}"
        made.append(n)
        return n

    yield make
    prefixes = tuple(made)
    for sb in client.list():
        if sb.name.startswith(prefixes):
            try:
                client.remove(sb.id, force=True)
            except den.NotFound:
                pass


@pytest.fixture
def sb(client, names):
    """A running busybox sandbox."""
    return client.create(names(), "busybox", memory="256M")


def sandbox_names(client) -> set:
    return {s.name for s in client.list()}


def http_get(path: str, token=None):
    """GET path (from /v1) on the dend under test, as a plain HTTP client
    would, with token as a bearer token when given (else DEN_TOKEN over
    TCP, nothing on the socket). Returns (status, body)."""
    import http.client
    import socket as _socket
    from urllib.parse import urlsplit

    if os.environ.get("DEN_HOST"):
        u = urlsplit(os.environ["DEN_HOST"] if "://" in os.environ["DEN_HOST"] else "http://" + os.environ["DEN_HOST"])
        conn = http.client.HTTPConnection(u.netloc, timeout=30)
        if token is None:
            token = os.environ.get("DEN_TOKEN")
    else:
        conn = http.client.HTTPConnection("den", timeout=30)
        s = _socket.socket(_socket.AF_UNIX)
        s.connect(os.environ["DEN_SOCKET"])
        conn.sock = s
    headers = {"Authorization": "Bearer " + token} if token else {}
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body
