"""Export and import: an agent as one sealed archive another dend can
make again (`den export`, `den import`). The archive is streamed both
ways, never held whole."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Optional, Union

from ._stream import BodyReader
from ._wire import from_dict
from .models import Import

ARCHIVE_TYPE = "application/vnd.den.agent"
KEY_HEADER = "Den-Archive-Key"

# Where an archive goes or comes from: a path, or a binary file object
# (or, for an import, bytes or an iterable of bytes).
Target = Union[str, "os.PathLike[str]", Any]


class Export(BodyReader):
    """An agent's archive as it is downloaded: a binary, file-like reader
    (see :class:`~den.BodyReader`). Its bytes are sealed: nothing in it can
    be read, changed or imported without ``key``.

    Attributes:
        key: the key it is sealed with: the one given, or the fresh one
            dend made. :meth:`den.Client.import_archive` needs it.
        memory: True when it holds the processes, not only the files.
        secrets: the secrets it needs on the dend it goes to, by name.
    """

    def __init__(self, transport, resp, sandbox: str, key: Optional[str]):
        super().__init__(transport, resp, f"the export of sandbox {sandbox}")
        self.key = resp.getheader(KEY_HEADER) or key or ""
        self.memory = resp.getheader("Den-Archive-Memory", "") == "true"
        self.secrets = [s for s in resp.getheader("Den-Archive-Secrets", "").split(",") if s]


class ArchiveVerbs:
    """Export and import; mixed into :class:`den.Client`."""

    def export(self, sandbox: str, to: Optional[Target] = None, *, fs_only: bool = False,
               key: Optional[str] = None) -> Export:
        """Write a sandbox's record and newest checkpoint as a sealed
        archive (`den export`): its files and, unless fs_only, its memory
        and processes. A running or paused sandbox is checkpointed first;
        a hibernated one exports the checkpoint it sleeps in; a stopped
        one, a files-only checkpoint of its files.

        key seals it (64 hex digits); without it dend makes a fresh one.
        Without to, the archive is returned as a stream to read to its end
        (close it when done early); with to (a path, written whole or not
        at all, or a binary file object) it is written there and the
        returned :class:`~den.Export`, read and closed, says its ``key``,
        ``memory`` and ``secrets``. The memory of a sandbox ever granted
        secrets is refused (:class:`~den.Conflict`): export it fs_only."""
        resp = self._t.send("POST", self._path(sandbox, "export"), query={"fs_only": True if fs_only else None},
                            headers={KEY_HEADER: key} if key else None)
        x = Export(self._t, resp, sandbox, key)
        if to is None:
            return x
        with x:
            if isinstance(to, (str, os.PathLike)):
                _write_whole(x, os.fspath(to))
            else:
                for chunk in x:
                    to.write(chunk)
        return x

    def import_archive(self, archive: Target, key: str, *, name: Optional[str] = None) -> Import:
        """Make a sandbox of the caller from an archive :meth:`export` wrote
        (`den import`): archive is a path, a binary file object, bytes or
        an iterable of bytes, streamed; key the key it was sealed with;
        name the sandbox's name here (default: its name in the archive).
        One exported with memory comes back hibernated and wakes with its
        processes on first use; one with files only, stopped. The secrets
        it is granted must be set on this dend first, or
        :class:`~den.Conflict` names them. A damaged, cut or altered
        archive, or the wrong key, is :class:`~den.Invalid` and leaves
        nothing."""
        q = {"name": name}
        if isinstance(archive, (str, os.PathLike)):
            with open(archive, "rb") as f:
                return self._import(f, key, q)
        return self._import(archive, key, q)

    def _import(self, body: Any, key: str, query: dict) -> Import:
        if isinstance(body, (bytearray, memoryview)):
            body = bytes(body)
        resp = self._t.send("POST", "/sandboxes/import", query=query, body=body, content_type=ARCHIVE_TYPE,
                            headers={KEY_HEADER: key or ""})
        try:
            res = from_dict(Import, json.loads(resp.read() or b"{}"))
        finally:
            self._t.release(resp)
        if res.sandbox is not None:
            res.sandbox._client = self
        return res


def _write_whole(r: BodyReader, path: str) -> None:
    """Copy r to path through a temporary file beside it, renamed over it
    once whole: a failure leaves no partial archive."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in r:
                f.write(chunk)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
