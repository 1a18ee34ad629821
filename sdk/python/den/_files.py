"""Files inside a sandbox, both ways. Contents and archives are streamed:
never held whole unless asked for (:meth:`FileVerbs.read_file`)."""

from __future__ import annotations

from typing import Any, Iterable, Optional, Union

from ._stream import BodyReader
from ._wire import from_dict
from .models import FileInfo

# What a write sends: bytes or str whole, or a binary file or an iterable
# of bytes, streamed as it is read.
Data = Union[bytes, str, Any, Iterable[bytes]]


def _body(data: Data):
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    return data


class FileVerbs:
    """Files inside a sandbox; mixed into :class:`den.Client`."""

    def stat(self, sandbox: str, path: str) -> FileInfo:
        """Describe the file at path (absolute, without "..")."""
        return from_dict(FileInfo, self._t.call("GET", self._path(sandbox, "files", "stat"), query={"path": path}))

    def list_files(self, sandbox: str, path: str) -> list:
        """List the directory at path."""
        data = self._t.call("GET", self._path(sandbox, "files", "list"), query={"path": path})
        return [from_dict(FileInfo, f) for f in data.get("files") or []]

    def open_file(self, sandbox: str, path: str) -> BodyReader:
        """Read the file at path as a stream: a file-like reader (iterate
        over it for chunks). Close it when done."""
        resp = self._t.send("GET", self._path(sandbox, "files", "content"), query={"path": path})
        return BodyReader(self._t, resp, f"{path} of sandbox {sandbox}")

    def read_file(self, sandbox: str, path: str) -> bytes:
        """The contents of the file at path, whole."""
        with self.open_file(sandbox, path) as r:
            return r.read()

    def write_file(self, sandbox: str, path: str, data: Data, mode: Optional[int] = None) -> None:
        """Create or replace the file at path with data: bytes, a str
        (UTF-8), or a binary file or iterable of bytes streamed as it is
        read. mode is the permission bits (e.g. 0o755); None lets dend
        choose (0644 for a new file)."""
        q = {"path": path}
        if mode is not None:
            q["mode"] = format(mode, "04o") if isinstance(mode, int) else str(mode)
        resp = self._t.send("PUT", self._path(sandbox, "files", "content"), query=q, body=_body(data),
                            content_type="application/octet-stream")
        resp.read()
        self._t.release(resp)

    def mkdir(self, sandbox: str, path: str, *, parents: bool = False, mode: Optional[int] = None,
              user: Optional[str] = None) -> None:
        """Create a directory (with parents: its missing parents too),
        owned by user when given (a name, uid, or either with :group)."""
        body = {"path": path}
        if parents:
            body["parents"] = True
        if mode is not None:
            body["mode"] = mode
        if user is not None:
            body["user"] = user
        self._t.call("POST", self._path(sandbox, "files", "mkdir"), body=body)

    def move(self, sandbox: str, from_: str, to: str) -> None:
        """Move or rename a file or directory."""
        self._t.call("POST", self._path(sandbox, "files", "move"), body={"from": from_, "to": to})

    def remove_file(self, sandbox: str, path: str, *, recursive: bool = False) -> None:
        """Remove a file, or with recursive a directory and all under it."""
        q = {"path": path, "recursive": True if recursive else None}
        self._t.call("DELETE", self._path(sandbox, "files"), query=q)

    def read_archive(self, sandbox: str, path: str) -> BodyReader:
        """A tar stream of path: a directory's contents, or one file
        (``tarfile.open(fileobj=r, mode="r|")`` reads it)."""
        resp = self._t.send("GET", self._path(sandbox, "files", "archive"), query={"path": path})
        return BodyReader(self._t, resp, f"an archive of {path} of sandbox {sandbox}")

    def write_archive(self, sandbox: str, path: str, data: Data) -> None:
        """Extract a tar stream (bytes, a binary file or an iterable of
        bytes) into the directory path, made with its parents."""
        resp = self._t.send("PUT", self._path(sandbox, "files", "archive"), query={"path": path}, body=_body(data),
                            content_type="application/x-tar")
        resp.read()
        self._t.release(resp)
