"""What a sandbox may use and reach: limits, network, idle policy, exposed
ports and secrets."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request

import pytest

import den
from conftest import http_get


def test_limits(client, sb):
    changed = client.set_limits(sb.name, memory="512M", pids=200, cpus=0.5)
    assert (changed.memory_bytes, changed.pids, changed.cpus) == (512 << 20, 200, 0.5)
    assert int(client.exec(sb.name, "ulimit -u").stdout) >= 200  # den-init's own on top
    with pytest.raises(den.Invalid) as e:
        client.set_limits(sb.name, memory="lots")
    assert e.value.hint
    assert client.get(sb.name).memory_bytes == 512 << 20  # unchanged


def test_network_policy(client, sb):
    sb2 = client.set_network(sb.name, "allow", ["pypi.org:443", "198.51.100.0/24"])
    assert sb2.network.mode == "allow" and sorted(sb2.network.allow) == ["198.51.100.0/24", "pypi.org:443"]
    assert client.set_network(sb.name, den.NetworkPolicy(mode="none")).network.mode == "none"
    for rule in ("169.254.169.254", "127.0.0.1:80", "not a rule!"):
        with pytest.raises(den.Invalid) as e:
            client.set_network(sb.name, "allow", [rule])
        assert e.value.message
    with pytest.raises(den.Invalid):
        client.set_network(sb.name, "sideways")
    assert client.get(sb.name).network.mode == "none"


def test_idle_policy(client, sb):
    got = client.set_policy(sb.name, pause_after="5m", hibernate_after=3600, ttl=0, keep_last=3)
    p = got.policy
    assert (p.pause_after, p.hibernate_after, p.ttl, p.keep_last) == ("5m", "1h", "0", 3)
    assert got.next is None or got.next.action in ("pause", "hibernate")
    # Only what is given changes.
    again = client.set_policy(sb.name, den.Policy(background_active=True))
    assert again.policy.pause_after == "5m" and again.policy.background_active is True
    assert again.policy.wake_on_boot is False
    woken = client.set_policy(sb.name, wake_on_boot=True)
    assert woken.policy.wake_on_boot is True and woken.policy.background_active is True
    with pytest.raises(den.Invalid) as e:
        client.set_policy(sb.name, pause_after="soon")
    assert e.value.hint or "duration" in e.value.message


def test_exposed_port_and_signed_url(client, sb):
    client.mkdir(sb.name, "/www")
    client.write_file(sb.name, "/www/index.html", b"hello from the sandbox\n")
    client.exec_detached(sb.name, ["busybox", "httpd", "-f", "-p", "8080", "-h", "/www"])
    exposed = client.expose_port(sb.name, 8080)
    assert [(p.port, p.public) for p in exposed.ports] == [(8080, False)]

    proxy = f"/v1/sandboxes/{sb.name}/ports/8080/proxy/"
    deadline = time.monotonic() + 30
    while True:
        status, body = http_get(proxy)
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (status, body) == (200, b"hello from the sandbox\n")

    link = client.port_url(sb.name, 8080, expires="10m")
    assert "den_signature=" in link.path and link.expires_at is not None
    if os.environ.get("DEN_HOST"):
        # Over TCP the link is absolute and needs no token.
        assert link.url.startswith(os.environ["DEN_HOST"].rstrip("/"))
        assert urllib.request.urlopen(link.url, timeout=30).read() == b"hello from the sandbox\n"
        assert http_get(proxy, token="")[0] == 401
        client.revoke_port_urls(sb.name, 8080)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(link.url, timeout=30)
        assert e.value.code == 401

    assert client.expose_port(sb.name, 8080, public=True).ports[0].public
    client.unexpose_port(sb.name, 8080)
    assert client.get(sb.name).ports == []
    assert http_get(proxy)[0] == 404
    with pytest.raises(den.NotFound):
        client.unexpose_port(sb.name, 8080)
    for bad in (0, 70000, 49900):
        with pytest.raises(den.Invalid):
            client.expose_port(sb.name, bad)


def test_secret_grants(client, sb, is_admin):
    if not is_admin:
        # Only admins grant secrets: an owner is told so, and nothing changes.
        with pytest.raises(den.Forbidden) as e:
            client.grant_secret(sb.name, "PY_SDK_SECRET")
        assert e.value.hint and e.value.status == 403
        assert client.get(sb.name).secrets == []
        return
    client.set_secret("PY_SDK_SECRET", "s3cr3t-value")
    try:
        assert "PY_SDK_SECRET" in [s.name for s in client.list_secrets()]
        got = client.grant_secret(sb.name, "PY_SDK_SECRET", env="APP_KEY")
        assert [(g.name, g.env) for g in got.secrets] == [("PY_SDK_SECRET", "APP_KEY")]
        assert client.exec(sb.name, 'test "$APP_KEY" = s3cr3t-value && echo match').stdout == b"match\n"
        # Printed, it is masked.
        assert client.exec(sb.name, 'echo "$APP_KEY"').stdout == b"*" * len("s3cr3t-value") + b"\n"

        client.grant_secret(sb.name, "PY_SDK_SECRET", file="key.txt")
        assert client.exec(sb.name, '[ "$(cat /run/secrets/key.txt)" = s3cr3t-value ] && echo file').stdout == b"file\n"
        assert client.revoke_secret(sb.name, "PY_SDK_SECRET").secrets == []
        assert client.exec(sb.name, "ls /run/secrets/key.txt").exit_code != 0
        with pytest.raises(den.NotFound) as e:
            client.revoke_secret(sb.name, "PY_SDK_SECRET")
        assert e.value.hint
        with pytest.raises(den.NotFound):
            client.grant_secret(sb.name, "PY_SDK_NO_SUCH_SECRET")
    finally:
        client.remove_secret("PY_SDK_SECRET")
