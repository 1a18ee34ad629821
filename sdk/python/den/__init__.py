"""den's Python SDK: durable gVisor sandboxes for AI agents, driven from
Python with nothing but the standard library.

    import den

    client = den.Client.from_env()          # DEN_SOCKET, or DEN_HOST + DEN_TOKEN
    with client.sandbox(image="busybox") as sb:
        result = sb.exec(["sh", "-c", "echo hello; exit 3"])
        print(result.exit_code, result.stdout_text)

See README.md for every verb, and api/openapi.yaml in den's repository for
the API underneath.
"""

import logging as _logging

from .client import DEFAULT_SOCKET, Client
from ._archive import Export
from ._events import EventStream
from ._exec import ExecStream
from ._stream import BodyReader, LogReader
from .errors import (
    Conflict,
    DenError,
    FollowError,
    Forbidden,
    Internal,
    Invalid,
    NotFound,
    OutcomeUnknown,
    QuotaExceeded,
    TooLarge,
    Unauthorized,
    Unavailable,
)
from .models import (
    Checkpoint,
    DiskHealth,
    Event,
    ExecResult,
    ExposedPort,
    FileInfo,
    Health,
    Import,
    NetworkPolicy,
    NextAction,
    Owner,
    Peer,
    Service,
    ServiceExit,
    Policy,
    PoolHealth,
    WarmHealth,
    BlobsHealth,
    PortURL,
    Process,
    Quota,
    Harness,
    HarnessSet,
    Rebase,
    RequestStatus,
    Run,
    Sandbox,
    Secret,
    SecretGrant,
    SetupStep,
    SSHKey,
    StreamEvent,
    Usage,
    WarmPool,
)

__version__ = "0.1.0"

# Reconnects are logged as warnings on the "den" logger; like any library,
# den prints nothing unless the program configures logging (or passes
# notice= to its client).
_logging.getLogger("den").addHandler(_logging.NullHandler())

__all__ = [
    "Client", "DEFAULT_SOCKET", "EventStream", "Export", "Import", "ExecStream", "BodyReader", "LogReader",
    "DenError", "Invalid", "Unauthorized", "Forbidden", "QuotaExceeded", "NotFound", "Conflict", "TooLarge",
    "Unavailable", "Internal", "OutcomeUnknown", "FollowError",
    "Checkpoint", "DiskHealth", "Event", "ExecResult", "ExposedPort", "FileInfo", "Health", "NetworkPolicy",
    "NextAction", "Owner", "Policy", "PoolHealth", "WarmHealth", "BlobsHealth", "PortURL", "Process", "Quota", "RequestStatus", "Run",
    "Harness", "HarnessSet", "Peer", "Rebase", "Sandbox", "Secret", "SecretGrant", "Service", "ServiceExit", "SetupStep", "SSHKey", "StreamEvent", "Usage", "WarmPool",
]
