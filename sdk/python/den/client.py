"""The client: every verb of den's API as a method.

A :class:`Client` talks to dend over its unix socket (the default,
/run/den/den.sock, root only, no token) or over TCP with a bearer token::

    client = den.Client.from_env()  # DEN_SOCKET, or DEN_HOST + DEN_TOKEN
    sb = client.create("web", image="busybox")
    print(client.exec("web", ["uname", "-a"]).stdout_text)

Methods take the sandbox (its name or id) first and return the models of
:mod:`den.models`. dend's errors are raised as :class:`den.DenError`
subclasses. Every call that changes something carries a fresh
Idempotency-Key and survives a dropped connection (see :mod:`den._retry`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets as _secrets
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, Union

from . import errors
from ._archive import ArchiveVerbs
from ._bound import install as _install_bound
from ._events import EventStream
from ._exec import ExecVerbs
from ._files import FileVerbs
from ._http import DEFAULT_RECONNECT, DEFAULT_SOCKET, Transport, escape
from ._wire import from_dict, to_wire
from .models import (
    Checkpoint,
    Event,
    Health,
    NetworkPolicy,
    Owner,
    Peer,
    Policy,
    PortURL,
    Process,
    Harness,
    HarnessSet,
    Rebase,
    RequestStatus,
    Sandbox,
    Secret,
    SecretGrant,
    Service,
    SSHKey,
    WarmPool,
)

Duration = Union[str, int, float]


def _duration(v: Optional[Duration]) -> Optional[str]:
    """A Go duration string: a str as it is, a number as seconds."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return str(v)  # dend says what is wrong with it
    return f"{v:g}s"


def _grant(g: Union[SecretGrant, dict, str]) -> dict:
    if isinstance(g, str):
        return {"name": g}
    return to_wire(g)


class Client(ExecVerbs, FileVerbs, ArchiveVerbs):
    """Calls dend. Safe for use from several threads.

    Args:
        socket: dend's unix socket (default /run/den/den.sock), when host
            is not given.
        host: dend's TCP address, e.g. "http://127.0.0.1:7070".
        token: the bearer token for host (an API token, ``den_...``).
        reconnect: how long, in seconds, a call that changes something
            keeps asking dend again after its connection dropped (0 gives
            up at once).
        notice: called with a sentence when that happens and when it ends
            well; failures are raised.
        user_agent: the User-Agent header.
    """

    def __init__(self, socket: Optional[str] = None, host: Optional[str] = None, token: Optional[str] = None, *,
                 reconnect: float = DEFAULT_RECONNECT, notice: Optional[Callable[[str], None]] = None,
                 user_agent: str = "den-python"):
        if socket and host:
            raise errors.Invalid("give dend's socket or its host, not both")
        self._t = Transport(socket, host, token, user_agent=user_agent, reconnect=reconnect, notice=notice)

    @classmethod
    def from_env(cls, **kwargs: Any) -> "Client":
        """A client configured as the den CLI is: DEN_HOST (with DEN_TOKEN)
        for TCP, else DEN_SOCKET, else /run/den/den.sock. kwargs are as
        for the constructor and win over the environment."""
        env: dict = {}
        if os.environ.get("DEN_HOST"):
            env = {"host": os.environ["DEN_HOST"], "token": os.environ.get("DEN_TOKEN")}
        elif os.environ.get("DEN_SOCKET"):
            env = {"socket": os.environ["DEN_SOCKET"]}
        env.update(kwargs)
        return cls(**env)

    def __repr__(self) -> str:
        return f"den.Client({self._t.where!r})"

    def close(self) -> None:
        """Close the idle connections to dend."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------

    @staticmethod
    def _path(sandbox: str, *rest: str) -> str:
        if not isinstance(sandbox, str) or not sandbox:
            raise errors.Invalid(f"no sandbox named: got {sandbox!r}", "give a sandbox's name or id")
        return "/sandboxes/" + escape(sandbox) + "".join("/" + r for r in rest)

    def _sandbox(self, data: Any) -> Sandbox:
        sb = from_dict(Sandbox, data or {})
        sb._client = self
        return sb

    def _sandbox_call(self, method: str, sandbox: str, *rest: str, body: Any = None, query: Optional[dict] = None) -> Sandbox:
        return self._sandbox(self._t.call(method, self._path(sandbox, *rest), body=body, query=query))

    # -- sandboxes --------------------------------------------------------

    def health(self) -> Health:
        """Report on dend: versions, storage, free space."""
        return from_dict(Health, self._t.call("GET", "/health"))

    def create(self, name: str, image: Optional[str] = None, *, cpus: Optional[float] = None,
               memory: Optional[str] = None, pids: Optional[int] = None, disk: Optional[str] = None,
               env: Optional[dict] = None, labels: Optional[dict] = None, from_: Optional[str] = None,
               ephemeral: Optional[bool] = None, policy: Union[Policy, dict, None] = None,
               network: Union[NetworkPolicy, dict, None] = None, secrets: Optional[list] = None,
               node: Optional[str] = None, setup: Optional[list] = None, keep: Optional[list] = None) -> Sandbox:
        """Create and start a sandbox (`den create`).

        image defaults to dend's ("debian"); memory and disk are sizes
        such as "512M" or "2G". from_ starts it from a checkpoint instead
        (an id, or "SANDBOX:NAME"). An ephemeral sandbox keeps nothing when
        it is destroyed, and is destroyed when its policy's ttl ends.
        network defaults to mode none; secrets (admins only) are secret
        names or :class:`~den.models.SecretGrant` values. node, in a fleet,
        is the node it goes to (default: the least committed one). setup
        are shell commands run in order once it boots and again by every
        rebase; keep the paths a rebase carries over besides /root, /home,
        /work and /srv.
        """
        body = {"name": name, "node": node, "setup": setup, "keep": keep, "image": image, "cpus": cpus, "memory": memory, "pids": pids, "disk": disk,
                "env": env, "labels": labels, "from": from_, "ephemeral": ephemeral or None,
                "policy": to_wire(policy) if policy is not None else None,
                "network": to_wire(network) if network is not None else None,
                "secrets": [_grant(g) for g in secrets] if secrets is not None else None}
        return self._sandbox(self._t.call("POST", "/sandboxes", body={k: v for k, v in body.items() if v is not None}))

    def list(self) -> list:
        """List sandboxes (`den ls`): those not destroyed, oldest first."""
        data = self._t.call("GET", "/sandboxes")
        return [self._sandbox(s) for s in data.get("sandboxes") or []]

    def get(self, sandbox: str) -> Sandbox:
        """Show a sandbox (`den inspect`), with its usage against its limits."""
        return self._sandbox_call("GET", sandbox)

    def remove(self, sandbox: str, force: bool = False) -> None:
        """Remove a sandbox and its files (`den rm`); a running one only
        with force."""
        self._t.call("DELETE", self._path(sandbox), query={"force": True} if force else None)

    def start(self, sandbox: str) -> Sandbox:
        """Start a stopped sandbox (a new generation, same files)."""
        return self._sandbox_call("POST", sandbox, "start")

    def stop(self, sandbox: str) -> Sandbox:
        """Stop a sandbox, keeping its files."""
        return self._sandbox_call("POST", sandbox, "stop")

    def events(self, sandbox: str) -> list:
        """A sandbox's history, oldest first."""
        data = self._t.call("GET", self._path(sandbox, "events"))
        return [from_dict(Event, e) for e in data.get("events") or []]

    def processes(self, sandbox: str) -> list:
        """List the processes running in a sandbox (`den top`), waking it if
        it sleeps."""
        data = self._t.call("GET", self._path(sandbox, "processes"))
        return [from_dict(Process, p) for p in data.get("processes") or []]

    @contextlib.contextmanager
    def sandbox(self, name: Optional[str] = None, image: Optional[str] = None, *, ephemeral: bool = True,
                **kwargs: Any) -> Iterator[Sandbox]:
        """Create a sandbox for a ``with`` block and remove it when the block
        ends, however it ends::

            with client.sandbox(image="busybox") as sb:
                print(sb.exec("echo hi").stdout_text)

        name defaults to a fresh "py-..." name; the sandbox is ephemeral
        unless ``ephemeral=False``; other arguments are as for
        :meth:`create`.
        """
        sb = self.create(name or "py-" + _secrets.token_hex(4), image, ephemeral=ephemeral, **kwargs)
        try:
            yield sb
        finally:
            with contextlib.suppress(errors.NotFound):
                self.remove(sb.id, force=True)

    # -- sleep and wake ---------------------------------------------------

    def pause(self, sandbox: str) -> Sandbox:
        """Freeze a running sandbox in RAM (`den pause`)."""
        return self._sandbox_call("POST", sandbox, "pause")

    def resume(self, sandbox: str) -> Sandbox:
        """Bring a paused or hibernated sandbox back to running (`den resume`)."""
        return self._sandbox_call("POST", sandbox, "resume")

    def hibernate(self, sandbox: str) -> Sandbox:
        """Save a sandbox to disk and free its RAM (`den hibernate`)."""
        return self._sandbox_call("POST", sandbox, "hibernate")

    def recover(self, sandbox: str, mode: str = "retry", checkpoint: Optional[str] = None) -> Sandbox:
        """Bring a sandbox in error back (`den recover`): mode "retry",
        "cold" (its files, afresh) or "rollback" (to checkpoint, or the one
        before the failed one)."""
        body = {"mode": mode, "checkpoint": checkpoint}
        return self._sandbox_call("POST", sandbox, "recover", body={k: v for k, v in body.items() if v is not None})

    def set_policy(self, sandbox: str, policy: Union[Policy, dict, None] = None, *,
                   pause_after: Optional[Duration] = None, hibernate_after: Optional[Duration] = None,
                   stop_after: Optional[Duration] = None, ttl: Optional[Duration] = None, background_active: Optional[bool] = None,
                   wake_on_boot: Optional[bool] = None, keep_last: Optional[int] = None, max_age: Optional[Duration] = None) -> Sandbox:
        """Change a sandbox's idle policy (`den policy NAME --...`): only
        what is given changes. Durations are Go duration strings ("15m")
        or seconds; 0 turns a step off. Returns the sandbox with the policy
        in effect."""
        body = to_wire(policy) if policy is not None else {}
        given = {"pause_after": _duration(pause_after), "hibernate_after": _duration(hibernate_after),
                 "stop_after": _duration(stop_after), "ttl": _duration(ttl), "background_active": background_active,
                 "wake_on_boot": wake_on_boot, "keep_last": keep_last,
                 "max_age": _duration(max_age)}
        body.update({k: v for k, v in given.items() if v is not None})
        return self._sandbox_call("PATCH", sandbox, "policy", body=body)

    # -- checkpoints, restore, fork ---------------------------------------

    def checkpoint(self, sandbox: str, name: Optional[str] = None, *, fs_only: bool = False) -> Checkpoint:
        """Take a checkpoint of a sandbox (`den checkpoint`): its files and,
        unless fs_only, its memory and processes. name is an optional
        label, unique within the sandbox."""
        body = {"name": name} if name else {}
        if fs_only:
            body["fs_only"] = True
        return from_dict(Checkpoint, self._t.call("POST", self._path(sandbox, "checkpoints"), body=body))

    def checkpoints(self, sandbox: str) -> list:
        """List a sandbox's checkpoints (`den checkpoints`), oldest first;
        their parent links make a tree."""
        data = self._t.call("GET", self._path(sandbox, "checkpoints"))
        return [from_dict(Checkpoint, c) for c in data.get("checkpoints") or []]

    def get_checkpoint(self, sandbox: str, checkpoint: str) -> Checkpoint:
        """One checkpoint of a sandbox, by id or name."""
        return from_dict(Checkpoint, self._t.call("GET", self._path(sandbox, "checkpoints", escape(checkpoint))))

    def remove_checkpoint(self, sandbox: str, checkpoint: str) -> None:
        """Remove a checkpoint of a sandbox (`den checkpoint rm`); one a
        sandbox still needs is a :class:`~den.Conflict`."""
        self._t.call("DELETE", self._path(sandbox, "checkpoints", escape(checkpoint)))

    def restore(self, sandbox: str, checkpoint: str) -> Sandbox:
        """Rewind a sandbox to one of its checkpoints (`den restore`), as a
        new generation."""
        return self._sandbox_call("POST", sandbox, "restore", body={"checkpoint": checkpoint})

    def fork(self, sandbox: str, name: str, *, from_: Optional[str] = None, count: Optional[int] = None) -> list:
        """Make new sandboxes that start as copies of one (`den fork`): of
        the live sandbox, or of its checkpoint from_. With count above 1
        they are NAME-1 … NAME-N. Returns the children."""
        body = {"name": name, "from": from_, "count": count}
        data = self._t.call("POST", self._path(sandbox, "fork"), body={k: v for k, v in body.items() if v is not None})
        return [self._sandbox(s) for s in data.get("sandboxes") or []]

    # -- rebase and setup ---------------------------------------------------

    def set_setup(self, sandbox: str, steps: Optional[list] = None, keep: Optional[list] = None) -> Sandbox:
        """Change a sandbox's setup steps and kept paths (`den setup`), as a
        rebase uses them: steps are shell commands run in order on the new
        root, keep the paths carried over besides /root, /home, /work and
        /srv. A list not given stays as it is; an empty one is cleared.
        Nothing runs now."""
        body = {"steps": list(steps) if steps is not None else None, "keep": list(keep) if keep is not None else None}
        return self._sandbox_call("PUT", sandbox, "setup", body={k: v for k, v in body.items() if v is not None})

    def rebase(self, sandbox: str, image: Optional[str] = None) -> Rebase:
        """Give a sandbox a new root from an image version, keeping its own
        files (`den rebase`): image is "IMAGE" (its newest version) or
        "IMAGE@VERSION", default the sandbox's own image. Its kept paths
        come over, its setup steps run again and its processes end. A
        failure, a setup step that exits non-zero included, rolls it back
        to the checkpoint taken first and raises :class:`~den.Conflict`
        naming the step and the end of its output."""
        body = {"image": image} if image else {}
        res = from_dict(Rebase, self._t.call("POST", self._path(sandbox, "rebase"), body=body))
        if res.sandbox is not None:
            res.sandbox._client = self
        return res

    def set_harness(self, sandbox: str, steps: Optional[list] = None, services: Optional[list] = None,
                    config_paths: Optional[list] = None) -> HarnessSet:
        """Give a sandbox a harness, or swap the one it has, on the sandbox
        as it is (`den harness set`): a files-only checkpoint
        pre-harness-gN first, the old harness's services stopped, steps
        run, services (dicts as :meth:`add_service` takes) started. A
        failed step rolls it back and raises :class:`~den.Conflict`
        naming it; bad input is :class:`~den.Invalid`."""
        body = {"steps": steps, "services": services, "config_paths": config_paths}
        res = from_dict(HarnessSet, self._t.call("PUT", self._path(sandbox, "harness"),
                                                 body={k: list(v) for k, v in body.items() if v is not None}))
        if res.sandbox is not None:
            res.sandbox._client = self
        return res

    def harness(self, sandbox: str) -> Harness:
        """A sandbox's harness (`den harness show`); none is
        :class:`~den.NotFound`."""
        return from_dict(Harness, self._t.call("GET", self._path(sandbox, "harness")))

    def remove_harness(self, sandbox: str) -> None:
        """Stop the harness's services and remove it from the record (`den
        harness rm`); what its steps installed stays."""
        self._t.call("DELETE", self._path(sandbox, "harness"))

    # -- peers --------------------------------------------------------------

    def add_peer(self, sandbox: str, other: str, *, checkpoint: Optional[str] = None, at: Optional[str] = None,
                 live: bool = False, restart: bool = False) -> Peer:
        """Give a sandbox a read-only view of another sandbox's files (`den
        peer add`): a snapshot of other's files now, of its checkpoint, or
        with live its files as they are at every read, at at (default
        /peers/OTHER). The view appears while the sandbox runs; one outside
        /peers needs restart on a paused sandbox (its processes end, its
        files stay). Another owner's sandbox is
        :class:`~den.NotFound`."""
        body = {"sandbox": other, "checkpoint": checkpoint, "at": at, "live": live or None, "restart": restart or None}
        return from_dict(Peer, self._t.call("POST", self._path(sandbox, "peers"),
                                            body={k: v for k, v in body.items() if v is not None}))

    def peers(self, sandbox: str) -> list:
        """List a sandbox's views of other sandboxes (`den peer ls`), in the
        order they were added."""
        data = self._t.call("GET", self._path(sandbox, "peers"))
        return [from_dict(Peer, p) for p in data.get("peers") or []]

    def refresh_peer(self, sandbox: str, peer: str, *, checkpoint: Optional[str] = None,
                     restart: bool = False) -> Peer:
        """Take a view again (`den peer refresh`): the other sandbox's files
        as they are now, or its checkpoint. peer is the view's id or the
        other sandbox's name; restart as for :meth:`add_peer`."""
        body = {"checkpoint": checkpoint, "restart": restart or None}
        return from_dict(Peer, self._t.call("POST", self._path(sandbox, "peers", escape(peer), "refresh"),
                                            body={k: v for k, v in body.items() if v is not None}))

    def remove_peer(self, sandbox: str, peer: str, restart: bool = False) -> None:
        """Take a view away from a sandbox (`den peer rm`); restart as for
        :meth:`add_peer`."""
        self._t.call("DELETE", self._path(sandbox, "peers", escape(peer)), query={"restart": True} if restart else None)

    # -- services -----------------------------------------------------------

    def add_service(self, sandbox: str, name: str, argv: Sequence[str], *, user: Optional[str] = None,
                    cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                    restart: Optional[str] = None, ready_port: Optional[int] = None,
                    ready_cmd: Optional[str] = None) -> Service:
        """Declare a service den keeps running (`den service add`): argv runs
        at every boot and again by restart ("always", the default,
        "on-failure" or "never"). A running sandbox starts it at once. A
        name taken is :class:`~den.Conflict`; a bad name, command, policy
        or ready port :class:`~den.Invalid`."""
        body = {"name": name, "argv": list(argv), "user": user, "cwd": cwd,
                "env": dict(env) if env is not None else None, "restart": restart,
                "ready_port": ready_port, "ready_cmd": ready_cmd}
        return from_dict(Service, self._t.call("POST", self._path(sandbox, "services"),
                                               body={k: v for k, v in body.items() if v is not None}))

    def services(self, sandbox: str) -> list:
        """List a sandbox's services and their states (`den service ls`), in
        the order they were added."""
        data = self._t.call("GET", self._path(sandbox, "services"))
        return [from_dict(Service, s) for s in data.get("services") or []]

    def restart_service(self, sandbox: str, name: str) -> None:
        """Stop a service's run and start it again at once (`den service
        restart`), whatever its policy."""
        self._t.call("POST", self._path(sandbox, "services", escape(name), "restart"))

    def remove_service(self, sandbox: str, name: str) -> None:
        """Stop a service (SIGTERM, SIGKILL after 5 seconds) and remove it
        from the record (`den service rm`)."""
        self._t.call("DELETE", self._path(sandbox, "services", escape(name)))

    # -- events -------------------------------------------------------------

    def stream_events(self, sandbox: Optional[str] = None, *, after: Optional[str] = None,
                      follow: bool = True) -> EventStream:
        """Follow what happens to sandboxes (`den events`): state changes,
        runs started and ended, limits hit, idle-policy steps, as
        :class:`~den.models.StreamEvent` values from an iterator::

            with client.stream_events("web", after="0") as events:
                for ev in events:
                    print(ev.id, ev.type, ev.message)

        sandbox keeps one sandbox's events (name or id; an unknown one is
        :class:`~den.NotFound` at once). after resumes after an event's id;
        "0" starts from the oldest event dend keeps; None from now. Without
        follow the iterator ends once the events dend keeps were read; with
        it, it follows until closed, reconnecting after a cut (see
        :class:`~den.EventStream`)."""
        return EventStream(self._t, sandbox, after, follow)

    # -- limits, network ----------------------------------------------------

    def set_limits(self, sandbox: str, *, cpus: Optional[float] = None, memory: Optional[str] = None,
                   pids: Optional[int] = None, disk: Optional[str] = None) -> Sandbox:
        """Change a sandbox's resource limits (`den limits NAME --...`), at
        once on a live sandbox; only what is given changes. pids 0 or
        disk "0" lift that limit."""
        body = {"cpus": cpus, "memory": memory, "pids": pids, "disk": disk}
        return self._sandbox_call("PATCH", sandbox, "limits", body={k: v for k, v in body.items() if v is not None})

    def set_network(self, sandbox: str, mode: Union[str, NetworkPolicy], allow: Optional[list] = None) -> Sandbox:
        """Change what a sandbox may reach (`den network`): mode "none",
        "allow" (what allow names: "pypi.org:443", "198.51.100.0/24", ...)
        or "open". Takes effect at once."""
        body = to_wire(mode) if isinstance(mode, NetworkPolicy) else {"mode": mode}
        if allow is not None:
            body["allow"] = list(allow)
        return self._sandbox_call("PUT", sandbox, "network", body=body)

    # -- ports --------------------------------------------------------------

    def expose_port(self, sandbox: str, port: int, public: bool = False) -> Sandbox:
        """Serve a port of a sandbox through dend (`den port expose`):
        private (a token that reaches the sandbox, or a signed link from
        :meth:`port_url`) unless public."""
        return self._sandbox_call("PUT", sandbox, "ports", escape(port), body={"public": True} if public else {})

    def unexpose_port(self, sandbox: str, port: int) -> None:
        """Stop serving a port of a sandbox (`den port rm`)."""
        self._t.call("DELETE", self._path(sandbox, "ports", escape(port)))

    def port_url(self, sandbox: str, port: int, expires: Optional[Duration] = None) -> PortURL:
        """Print a link to a port that works without a token until it
        expires (`den port url`): expires is "24h" or seconds (default an
        hour). ``url`` is absolute over TCP or with dend's ports domain;
        over the unix socket ``path`` is relative to wherever dend is
        reachable."""
        q = {"expires": _duration(expires)} if expires is not None else None
        u = from_dict(PortURL, self._t.call("GET", self._path(sandbox, "ports", escape(port), "url"), query=q))
        base = self._t.base_url()
        if not u.url and base and u.path.startswith("/v1/"):
            u.url = base + u.path
        return u

    def revoke_port_urls(self, sandbox: str, port: int) -> None:
        """End every signed link to a port made so far (`den port url --revoke`)."""
        self._t.call("DELETE", self._path(sandbox, "ports", escape(port), "url"))

    # -- secrets ------------------------------------------------------------

    def set_secrets(self, sandbox: str, grants: list) -> Sandbox:
        """Replace the secrets granted to a sandbox's commands (admins
        only): secret names or :class:`~den.models.SecretGrant` values. A
        secret left out is revoked at once."""
        return self._sandbox_call("PUT", sandbox, "secrets", body={"grants": [_grant(g) for g in grants]})

    def grant_secret(self, sandbox: str, secret: str, *, env: Optional[str] = None, file: Optional[str] = None) -> Sandbox:
        """Give a sandbox's commands a secret (`den secret grant`, admin): as
        the environment variable env (default: its name) or the file file
        in /run/secrets. Granting it again replaces its target."""
        sb = self.get(sandbox)
        grants = [g for g in sb.secrets if g.name != secret]
        grants.append(SecretGrant(name=secret, env=env or "", file=file or ""))
        return self.set_secrets(sb.id, grants)

    def revoke_secret(self, sandbox: str, secret: str) -> Sandbox:
        """Take a secret away from a sandbox's commands (`den secret revoke`,
        admin); :class:`~den.NotFound` if it was not granted."""
        sb = self.get(sandbox)
        grants = [g for g in sb.secrets if g.name != secret]
        if len(grants) == len(sb.secrets):
            raise errors.NotFound(f"secret {secret} is not granted to sandbox {sandbox}",
                                  f"`den inspect {sandbox}` lists its secrets")
        return self.set_secrets(sb.id, grants)

    def set_secret(self, name: str, value: Union[bytes, str]) -> Secret:
        """Set a secret (`den secret set`, admin), replacing any value it
        had. The value never comes back out through the API."""
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        resp = self._t.send("PUT", "/secrets/" + escape(name), body=data, content_type="application/octet-stream")
        try:
            return from_dict(Secret, json.loads(resp.read() or b"{}"))
        finally:
            self._t.release(resp)

    def list_secrets(self) -> list:
        """List secrets (`den secret ls`): names and times, never values."""
        data = self._t.call("GET", "/secrets")
        return [from_dict(Secret, s) for s in data.get("secrets") or []]

    def remove_secret(self, name: str) -> None:
        """Remove a secret (`den secret rm`)."""
        self._t.call("DELETE", "/secrets/" + escape(name))

    # -- warm pools, SSH keys -----------------------------------------------

    def set_warm(self, image: str, count: int, memory_bytes: Optional[int] = None) -> WarmPool:
        """Keep count instances of an image booted ahead of demand on the
        node that answers (`den image warm`, admin), for sandboxes of
        memory_bytes (default: a create's, 1 GiB); a create that fits
        claims one instead of booting. 0 empties the pool. Returns the pool
        as set."""
        body = {"count": count, "memory_bytes": memory_bytes}
        return from_dict(WarmPool, self._t.call("PUT", "/images/" + escape(image) + "/warm",
                                                body={k: v for k, v in body.items() if v is not None}))

    def warm_pools(self) -> dict:
        """The answering node's warm pools, by image name: the images that
        keep one (`den image ls` shows them beside the images)."""
        data = self._t.call("GET", "/images")
        return {im["name"]: from_dict(WarmPool, im["warm"]) for im in data.get("images") or [] if im.get("warm")}

    def add_ssh_key(self, name: str, public_key: str) -> SSHKey:
        """Register a public key for the caller's token (`den ssh-key add`):
        one key in authorized_keys form, as in FILE.pub. It reaches dend's
        SSH gateway with the token's rights until the token is revoked;
        root on the unix socket has no token to tie it to
        (:class:`~den.Invalid`)."""
        return from_dict(SSHKey, self._t.call("POST", "/ssh-keys", body={"name": name, "public_key": public_key}))

    def list_ssh_keys(self) -> list:
        """List the caller's token's SSH keys (`den ssh-key ls`; an admin's:
        every key), oldest first."""
        data = self._t.call("GET", "/ssh-keys")
        return [from_dict(SSHKey, k) for k in data.get("keys") or []]

    def remove_ssh_key(self, key: str) -> None:
        """Remove an SSH key (`den ssh-key rm`), by its name or fingerprint."""
        self._t.call("DELETE", "/ssh-keys/" + escape(key))

    # -- requests, owners ---------------------------------------------------

    def request(self, key: str) -> RequestStatus:
        """What became of a request sent with the Idempotency-Key key (see
        :class:`~den.OutcomeUnknown`): :class:`~den.NotFound` when dend has
        no record of it for this caller."""
        return from_dict(RequestStatus, self._t.call("GET", "/requests/" + escape(key)))

    def owner(self, owner: str = "self") -> Owner:
        """An owner's quota, use and grants (`den owner show`); "self" is
        the caller's own."""
        return from_dict(Owner, self._t.call("GET", "/owners/" + escape(owner)))


_install_bound(Client)

__all__ = ["Client", "DEFAULT_SOCKET"]
