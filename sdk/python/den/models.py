"""Typed results: dataclasses matching the JSON of den's API.

Each model names the schema of api/openapi.yaml it mirrors in
``__schema__``, with the same fields under the same names (``from_`` for
the JSON ``from``); a test keeps the two in step. Decoding ignores fields
the SDK does not know yet and fills absent ones with their defaults: ``""``,
``0``, ``False``, empty lists and maps, and ``None`` for times, nested
objects and values whose absence means something (a run's ``exit_code``).
Times are timezone-aware :class:`datetime.datetime` values.

A :class:`Sandbox` that came from a :class:`den.Client` is also a handle:
``sb.exec(...)``, ``sb.pause()`` and the other sandbox verbs act on it (by
id), and those that answer with the sandbox update it in place.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Optional

from ._bound import SandboxVerbs

__all__ = [
    "Health",
    "DiskHealth",
    "PoolHealth",
    "WarmHealth",
    "BlobsHealth",
    "Usage",
    "NetworkPolicy",
    "Policy",
    "NextAction",
    "ExposedPort",
    "SecretGrant",
    "Sandbox",
    "Event",
    "StreamEvent",
    "SetupStep",
    "Rebase",
    "Import",
    "Peer",
    "Service",
    "ServiceExit",
    "WarmPool",
    "SSHKey",
    "Run",
    "Checkpoint",
    "FileInfo",
    "Process",
    "PortURL",
    "RequestStatus",
    "Secret",
    "Quota",
    "Owner",
    "ExecResult",
]


@dataclass
class DiskHealth:
    """Free space on dend's data disk against the reserve it keeps."""

    __schema__ = "DiskHealth"
    free_bytes: int = 0
    reserve_bytes: int = 0
    low: bool = False


@dataclass
class PoolHealth:
    """How full the storage pool is, and how sandboxes share it."""

    __schema__ = "PoolHealth"
    size_bytes: int = 0
    used_bytes: int = 0
    free_bytes: int = 0
    reserve_bytes: int = 0
    full: bool = False
    disk_caps: bool = False
    default_disk_bytes: int = 0
    promised_bytes: int = 0
    overcommit: float = 0.0


@dataclass
class WarmHealth:
    """What the answering node's warm pools hold on its host, beside its memory."""

    __schema__ = "WarmHealth"
    instances: int = 0
    booting: int = 0
    host_memory_bytes: int = 0
    memory_total_bytes: int = 0
    memory_available_bytes: int = 0
    reserve_bytes: int = 0
    pressure: bool = False


@dataclass
class BlobsHealth:
    """Whether the answering node reaches its blob store (absent without one)."""

    __schema__ = "BlobsHealth"
    reachable: bool = False
    error: str = ""
    since: Optional[datetime.datetime] = None


@dataclass
class Health:
    """dend's status and versions (GET /v1/health)."""

    __schema__ = "Health"
    status: str = ""
    version: str = ""
    runsc_version: str = ""
    storage: str = ""
    disk: Optional[DiskHealth] = None
    pool: Optional[PoolHealth] = None
    warm: Optional[WarmHealth] = None
    blobs: Optional[BlobsHealth] = None


@dataclass
class Usage:
    """What a sandbox uses now, against its limits (in :meth:`den.Client.get` only)."""

    __schema__ = "Usage"
    cpu_seconds: float = 0.0
    memory_bytes: int = 0
    pids: int = 0
    disk_bytes: int = 0
    run_output_bytes: int = 0
    run_output_limit_bytes: int = 0


@dataclass
class NetworkPolicy:
    """What a sandbox may reach: mode ``none``, ``allow`` (what ``allow``
    names: CIDRs, addresses or domains, optionally with ports) or ``open``."""

    __schema__ = "NetworkPolicy"
    mode: str = "none"
    allow: list[str] = field(default_factory=list)


@dataclass
class Policy:
    """A sandbox's idle policy and checkpoint retention. Durations are Go
    duration strings ("90s", "15m", "2h"); "0" turns a step off. In a
    request, None leaves a field as it is; in a Sandbox every field is set."""

    __schema__ = "Policy"
    pause_after: Optional[str] = None
    hibernate_after: Optional[str] = None
    stop_after: Optional[str] = None
    ttl: Optional[str] = None
    background_active: Optional[bool] = None
    wake_on_boot: Optional[bool] = None
    keep_last: Optional[int] = None
    max_age: Optional[str] = None


@dataclass
class NextAction:
    """The next step of a sandbox's idle policy, unless it is used first."""

    __schema__ = "NextAction"
    action: str = ""
    at: Optional[datetime.datetime] = None


@dataclass
class ExposedPort:
    """A port of a sandbox that dend serves."""

    __schema__ = "ExposedPort"
    port: int = 0
    public: bool = False


@dataclass
class SecretGrant:
    """A secret given to a sandbox's commands: as the environment variable
    ``env`` (default: its name) or as the file ``file`` in /run/secrets."""

    __schema__ = "SecretGrant"
    name: str = ""
    env: str = ""
    file: str = ""


@dataclass
class Harness:
    """A sandbox's agent program, apart from its environment: its install
    steps, its services (as :meth:`den.Client.add_service` takes them, as
    dicts) and its configuration paths, kept by a rebase."""

    __schema__ = "Harness"
    steps: list[str] = field(default_factory=list)
    services: list[dict] = field(default_factory=list)
    config_paths: list[str] = field(default_factory=list)


@dataclass
class Sandbox(SandboxVerbs):
    """The durable record of one sandbox, and a handle on it."""

    __schema__ = "Sandbox"
    id: str = ""
    name: str = ""
    owner: str = ""
    image: str = ""
    image_version: int = 0
    image_outdated: bool = False
    setup: list[str] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)
    harness: Optional[Harness] = None
    cpus: float = 0.0
    memory_bytes: int = 0
    pids: int = 0
    disk_bytes: int = 0
    usage: Optional[Usage] = None
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    state: str = ""
    reason: str = ""
    generation: int = 0
    node: str = ""
    address: str = ""
    ephemeral: bool = False
    network: Optional[NetworkPolicy] = None
    secrets: list[SecretGrant] = field(default_factory=list)
    ports: list[ExposedPort] = field(default_factory=list)
    policy: Optional[Policy] = None
    next: Optional[NextAction] = None
    running_for: str = ""
    checkpoint: str = ""
    origin: str = ""
    head: str = ""
    pending: str = ""
    created_at: Optional[datetime.datetime] = None
    updated_at: Optional[datetime.datetime] = None
    _client: Any = field(default=None, repr=False, compare=False, metadata={"wire": False})


@dataclass
class Event:
    """One entry of a sandbox's history."""

    __schema__ = "Event"
    seq: int = 0
    time: Optional[datetime.datetime] = None
    type: str = ""
    from_: str = field(default="", metadata={"json": "from"})
    to: str = ""
    generation: int = 0
    message: str = ""


@dataclass
class StreamEvent:
    """One event of :meth:`den.Client.stream_events`: a line of a sandbox's
    history (``type`` paused, resumed, ...), run.started, run.ended,
    limit.hit, policy.action, or a ``gap`` (without an ``id``) saying
    events before it may be missing. ``id`` resumes a stream after it, on
    any node of a fleet: pass it back as it came, it is opaque. ``node``
    is, in a fleet, the node the event happened on."""

    __schema__ = "StreamEvent"
    id: str = ""
    time: Optional[datetime.datetime] = None
    type: str = ""
    node: str = ""
    sandbox_id: str = ""
    sandbox: str = ""
    owner: str = ""
    from_: str = field(default="", metadata={"json": "from"})
    to: str = ""
    generation: int = 0
    message: str = ""
    run_id: str = ""
    run_status: str = ""
    exit_code: Optional[int] = None
    limit_hit: str = ""


@dataclass
class SetupStep:
    """One setup step as a rebase ran it; ``run`` is its run id, for
    :meth:`den.Client.logs`."""

    __schema__ = "SetupStep"
    step: int = 0
    harness: bool = False
    command: str = ""
    run: str = ""
    exit_code: int = 0
    duration_ms: int = 0


@dataclass
class Rebase:
    """What a rebase did: the sandbox on its new root, the files-only
    checkpoint taken first (restoring it undoes the rebase), the image
    versions before and after, the kept paths carried over and the setup
    steps run."""

    __schema__ = "Rebase"
    sandbox: Optional[Sandbox] = None
    checkpoint: str = ""
    from_: str = field(default="", metadata={"json": "from"})
    to: str = ""
    kept: list[str] = field(default_factory=list)
    steps: list[SetupStep] = field(default_factory=list)
    duration_ms: int = 0


@dataclass
class HarnessSet:
    """What setting a harness did: the sandbox, its harness, the
    files-only checkpoint taken first (pre-harness-gN; restoring it undoes
    the swap) and the steps run."""

    __schema__ = "HarnessSet"
    sandbox: Optional[Sandbox] = None
    harness: Optional[Harness] = None
    checkpoint: str = ""
    steps: list[SetupStep] = field(default_factory=list)
    duration_ms: int = 0


@dataclass
class Import:
    """What an import made: the sandbox (hibernated with its processes when
    ``memory``, else stopped with its files), its name where it was
    exported, the secrets it is granted by name, its image, and
    ``image_note`` when this dend lacks that image (its files are whole,
    but a rebase needs the image)."""

    __schema__ = "Import"
    sandbox: Optional[Sandbox] = None
    from_: str = field(default="", metadata={"json": "from"})
    memory: bool = False
    secrets: list[str] = field(default_factory=list)
    image: str = ""
    image_digest: str = ""
    image_note: str = ""
    exported_at: Optional[datetime.datetime] = None


@dataclass
class Peer:
    """A sandbox's read-only view of another sandbox's files, mounted at
    ``at``: a snapshot taken at ``taken_at``, of ``checkpoint``, or with
    ``live`` the files as they are."""

    __schema__ = "Peer"
    id: str = ""
    sandbox: str = ""
    sandbox_id: str = ""
    at: str = ""
    checkpoint: str = ""
    taken_at: Optional[datetime.datetime] = None
    live: bool = False


@dataclass
class ServiceExit:
    """How a service's last run ended: ``code`` (-1 when ``signal`` ended
    it), or ``error`` when it could not be started."""

    __schema__ = "ServiceExit"
    code: int = 0
    signal: str = ""
    error: str = ""
    at: Optional[datetime.datetime] = None


@dataclass
class Service:
    """A long-lived process den-init keeps running in a sandbox, with its
    state: starting, running, ready, backoff, exited, failed or stopping;
    while the sandbox does not run, the sandbox's state. ``run_id`` is the
    run of its current or last start (its output is that run's logs)."""

    __schema__ = "Service"
    name: str = ""
    argv: list[str] = field(default_factory=list)
    user: str = ""
    cwd: str = ""
    env: dict[str, str] = field(default_factory=dict)
    restart: str = ""
    ready_port: int = 0
    ready_cmd: str = ""
    state: str = ""
    harness: bool = False
    restarts: int = 0
    run_id: str = ""
    pid: int = 0
    started_at: Optional[datetime.datetime] = None
    last_exit: Optional[ServiceExit] = None
    next_start: Optional[datetime.datetime] = None


@dataclass
class WarmPool:
    """Instances of an image the answering node keeps booted ahead of
    demand, for sandboxes of ``memory_bytes``; ``held`` says why it is
    below its target and not refilling."""

    __schema__ = "WarmPool"
    target: int = 0
    memory_bytes: int = 0
    ready: int = 0
    booting: int = 0
    host_memory_bytes: int = 0
    held: str = ""


@dataclass
class SSHKey:
    """A public key of dend's SSH gateway; it acts with the rights of the
    token it was added with (``token_id``)."""

    __schema__ = "SSHKey"
    name: str = ""
    fingerprint: str = ""
    type: str = ""
    public_key: str = ""
    comment: str = ""
    token_id: str = ""
    created_at: Optional[datetime.datetime] = None


@dataclass
class Run:
    """The record of one command. ``status`` is running, exited (see
    ``exit_code``), killed (see ``signal``), timed_out or lost."""

    __schema__ = "Run"
    id: str = ""
    sandbox: str = ""
    generation: int = 0
    pid: int = 0
    argv: list[str] = field(default_factory=list)
    cwd: str = ""
    env_names: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    user: str = ""
    tty: bool = False
    detached: bool = False
    status: str = ""
    exit_code: Optional[int] = None
    signal: str = ""
    limit_hit: str = ""
    started_at: Optional[datetime.datetime] = None
    ended_at: Optional[datetime.datetime] = None
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    output_max: int = 0
    output_cut: str = ""


@dataclass
class Checkpoint:
    """An immutable moment of a sandbox: its files and, unless files-only,
    its memory and processes."""

    __schema__ = "Checkpoint"
    id: str = ""
    sandbox: str = ""
    name: str = ""
    kind: str = ""
    parent: str = ""
    memory: bool = False
    generation: int = 0
    engine_version: str = ""
    memory_bytes: int = 0
    files_bytes: int = 0
    created_at: Optional[datetime.datetime] = None
    needed_by: list[str] = field(default_factory=list)
    # Where its bytes are: "local", "uploading" or "uploaded" (in dend's
    # blob store too), and what uploading it sent.
    location: str = "local"
    uploaded_bytes: int = 0


@dataclass
class FileInfo:
    """One file inside a sandbox; ``type`` is file, dir, symlink or other."""

    __schema__ = "FileInfo"
    name: str = ""
    path: str = ""
    size: int = 0
    mode: int = 0
    type: str = ""
    mod_time: Optional[datetime.datetime] = None
    target: str = ""
    uid: int = 0
    gid: int = 0
    owner: str = ""
    group: str = ""
    xattrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Process:
    """One process running in a sandbox."""

    __schema__ = "Process"
    pid: int = 0
    ppid: int = 0
    name: str = ""
    command: str = ""
    state: str = ""
    rss_bytes: int = 0
    secrets: bool = False


@dataclass
class PortURL:
    """A signed link to an exposed port that works without a token until
    ``expires_at``. ``url`` is absolute when it can be told: dend's ports
    domain, or the SDK's own dend address over TCP."""

    __schema__ = "PortURL"
    path: str = ""
    url: str = ""
    expires_at: Optional[datetime.datetime] = None


@dataclass
class RequestStatus:
    """What became of a request sent with an Idempotency-Key."""

    __schema__ = "RequestStatus"
    key: str = ""
    state: str = ""
    method: str = ""
    path: str = ""
    started_at: Optional[datetime.datetime] = None
    ended_at: Optional[datetime.datetime] = None
    status: int = 0
    response: Any = None
    error: Optional[dict[str, str]] = None
    sandbox: str = ""
    hint: str = ""


@dataclass
class Secret:
    """A secret's name and times; never its value."""

    __schema__ = "Secret"
    name: str = ""
    created_at: Optional[datetime.datetime] = None
    updated_at: Optional[datetime.datetime] = None


@dataclass
class Quota:
    """An owner's quota (0: no limit), or its use."""

    __schema__ = "Quota"
    sandboxes: int = 0
    memory_bytes: int = 0
    cpus: float = 0.0
    disk_bytes: int = 0
    checkpoints: int = 0


@dataclass
class Owner:
    """An owner identity's quota, use and private-range grants."""

    __schema__ = "Owner"
    id: str = ""
    tokens: list[str] = field(default_factory=list)
    default: bool = False
    quota: Optional[Quota] = None
    use: Optional[Quota] = None
    allow_private: list[str] = field(default_factory=list)
    updated_at: Optional[datetime.datetime] = None


@dataclass
class ExecResult:
    """What an attached command did: its final :class:`Run` and the output
    it wrote to the streams that were captured (those given no callback or
    file). Not an API schema: the SDK's own."""

    run: Run
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def exit_code(self) -> Optional[int]:
        """The exit code, or None when the command was killed or lost."""
        return self.run.exit_code

    @property
    def status(self) -> str:
        """exited, killed, timed_out or lost."""
        return self.run.status

    @property
    def ok(self) -> bool:
        """Whether the command exited with 0."""
        return self.run.status == "exited" and self.run.exit_code == 0

    @property
    def stdout_text(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        """stderr decoded as UTF-8 (invalid bytes replaced)."""
        return self.stderr.decode("utf-8", "replace")
