"""The sandbox verbs on a :class:`den.models.Sandbox` handle.

``sb.exec(...)`` is ``client.exec(sb.id, ...)`` with the client the
sandbox came from; verbs that answer with the sandbox update the handle in
place and return it, so ``sb.state`` stays current. The methods are made
from the client's own (same signature after the sandbox, same docs) once
the client class exists; :func:`install` does it.

One verb has another name on the handle: ``sb.take_checkpoint(...)`` is
``client.checkpoint(sb.id, ...)``, as ``sb.checkpoint`` is the sandbox's
field (the checkpoint holding a hibernated sandbox's state).
"""

from __future__ import annotations

import dataclasses
import functools

# Client methods that answer with the sandbox: the handle takes the answer.
_UPDATING = (
    "start", "stop", "pause", "resume", "hibernate", "recover", "restore", "set_policy", "set_limits",
    "set_network", "expose_port", "set_secrets", "grant_secret", "revoke_secret", "set_setup",
)

# Client methods whose answer holds the sandbox in its .sandbox: the handle
# takes that, and the answer is returned.
_UPDATING_VIA = ("rebase",)

# Client methods passed through, their answer returned as it is.
_PASSING = (
    "remove", "events", "processes",
    "exec", "exec_stream", "exec_detached", "runs", "get_run", "logs", "signal",
    "stat", "list_files", "open_file", "read_file", "write_file", "mkdir", "move", "remove_file",
    "read_archive", "write_archive",
    "checkpoints", "get_checkpoint", "remove_checkpoint", "fork",
    "unexpose_port", "port_url", "revoke_port_urls",
    "add_peer", "peers", "refresh_peer", "remove_peer", "export",
    "add_service", "services", "restart_service", "remove_service",
)


class SandboxVerbs:
    """The base of :class:`den.models.Sandbox` that makes it a handle."""

    _client = None

    def _bound(self):
        if self._client is None:
            raise RuntimeError("this Sandbox was not made by a den.Client: use client.get(name) for a handle")
        return self._client

    def refresh(self):
        """Read the sandbox again from dend (with its usage); returns it."""
        return self._take(self._bound().get(self.id))

    def _take(self, other):
        for f in dataclasses.fields(other):
            if f.name != "_client":
                setattr(self, f.name, getattr(other, f.name))
        return self



def _method(client_cls, name: str, updating: bool, via: bool = False):
    target = getattr(client_cls, name)

    @functools.wraps(target)
    def method(self, *args, **kwargs):
        result = getattr(self._bound(), name)(self.id, *args, **kwargs)
        if via:
            if result.sandbox is not None:
                self._take(result.sandbox)
            return result
        return self._take(result) if updating else result

    method.__doc__ = (target.__doc__ or "") + f"\n\n(On this sandbox: ``client.{name}(sandbox.id, ...)``.)"
    return method


def install(client_cls) -> None:
    """Give SandboxVerbs the client's sandbox verbs."""
    SandboxVerbs.take_checkpoint = _method(client_cls, "checkpoint", False)
    for name in _UPDATING:
        setattr(SandboxVerbs, name, _method(client_cls, name, True))
    for name in _PASSING:
        setattr(SandboxVerbs, name, _method(client_cls, name, False))
    for name in _UPDATING_VIA:
        setattr(SandboxVerbs, name, _method(client_cls, name, False, via=True))
