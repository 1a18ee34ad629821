/**
 * den's TypeScript SDK: a thin client over dend's REST API (/v1), with
 * streaming exec. Node ≥ 20, ESM.
 *
 *   import { Client } from "@den-dev/sdk";
 *   const den = Client.fromEnv(); // DEN_SOCKET, or DEN_HOST + DEN_TOKEN
 *   await den.createSandbox({ name: "web", image: "debian" });
 *   const run = await den.exec("web", { argv: ["uname", "-a"] });
 *   console.log(run.exit_code, run.stdout);
 *
 * Every change carries a fresh Idempotency-Key: when the connection drops
 * mid-call the client asks dend again until it answers and returns the
 * real outcome, or throws OutcomeUnknownError with what to check.
 */
import type { Readable } from "node:stream";

import { DenError } from "./errors.js";
import { EventStream, type EventsOptions } from "./events.js";
import { execStream, type ExecIO, type ExecResult } from "./exec.js";
import { Transport, type TransportOptions } from "./transport.js";
import type {
  AddPeerRequest, Checkpoint, CreateSandboxRequest, Event, ExecRequest, FileInfo, Health, Image, LimitsRequest, WarmPool,
  MkdirRequest, NetworkPolicy, Peer, Policy, PortURL, Process, Rebase, RefreshPeerRequest, RequestStatus, Run, Sandbox,
  Service, ServiceSpec, Harness, HarnessSet,
  SecretGrant, SetupRequest, SSHKey, Import,
} from "./types.js";

export * from "./errors.js";
export type * from "./types.js";
export type { ExecIO, ExecResult } from "./exec.js";
export { EventStream, type EventsOptions } from "./events.js";
export type { TransportOptions as ClientOptions } from "./transport.js";

/** An agent's archive as exportSandbox downloads it. */
export interface Export {
  /** The sealed bytes, streamed: nothing in them can be read, changed or imported without key. */
  archive: Readable;
  /** The key it is sealed with: the one given, or the fresh one dend made. importSandbox needs it. */
  key: string;
  /** True when it holds the processes, not only the files. */
  memory: boolean;
  /** The secrets it needs on the dend it goes to, by name. */
  secrets: string[];
}

const archiveKey = "Den-Archive-Key";

const sb = (name: string, ...rest: string[]) =>
  ["/v1/sandboxes", encodeURIComponent(name), ...rest.map(encodeURIComponent)].join("/");

export class Client {
  private readonly t: Transport;

  /** A client for dend at opts.host with opts.token, or on opts.socket (default /run/den/den.sock). */
  constructor(opts: TransportOptions = {}) {
    this.t = new Transport(opts);
  }

  /** DEN_HOST and DEN_TOKEN, else DEN_SOCKET, else the default socket. */
  static fromEnv(env: Record<string, string | undefined> = process.env): Client {
    if (env.DEN_HOST) return new Client({ host: env.DEN_HOST, token: env.DEN_TOKEN });
    return new Client({ socket: env.DEN_SOCKET || undefined });
  }

  health(): Promise<Health> {
    return this.t.json("GET", "/v1/health");
  }

  /** What became of a change sent with an idempotency key. */
  request(key: string): Promise<RequestStatus> {
    return this.t.json("GET", `/v1/requests/${encodeURIComponent(key)}`);
  }

  // Sandboxes.

  createSandbox(req: Partial<CreateSandboxRequest> & { name: string }): Promise<Sandbox> {
    return this.t.json("POST", "/v1/sandboxes", { json: req });
  }
  async listSandboxes(): Promise<Sandbox[]> {
    return (await this.t.json<{ sandboxes: Sandbox[] }>("GET", "/v1/sandboxes")).sandboxes;
  }
  getSandbox(name: string): Promise<Sandbox> {
    return this.t.json("GET", sb(name));
  }
  async removeSandbox(name: string, opts: { force?: boolean } = {}): Promise<void> {
    await this.t.send("DELETE", sb(name), { query: { force: opts.force || undefined } });
  }
  startSandbox(name: string): Promise<Sandbox> {
    return this.t.json("POST", sb(name, "start"));
  }
  stopSandbox(name: string): Promise<Sandbox> {
    return this.t.json("POST", sb(name, "stop"));
  }
  async events(name: string): Promise<Event[]> {
    return (await this.t.json<{ events: Event[] }>("GET", sb(name, "events"))).events;
  }

  /**
   * Runs `fn` with a new ephemeral sandbox and removes it afterwards,
   * however `fn` ends.
   */
  async withSandbox<T>(req: Partial<CreateSandboxRequest> & { name: string }, fn: (s: Sandbox) => Promise<T>): Promise<T> {
    const s = await this.createSandbox({ ephemeral: true, ...req });
    try {
      return await fn(s);
    } finally {
      await this.removeSandbox(s.name, { force: true }).catch(() => {});
    }
  }

  /**
   * Follows what happens to sandboxes (GET /v1/events): state changes,
   * runs started and ended, limits hit, idle-policy steps. Resolves once
   * the stream is open (an unknown sandbox throws not_found); iterate it
   * with `for await`. `after` resumes after an event's id ("0": from the
   * oldest dend keeps; default: from now); `follow: false` ends once what
   * dend keeps was read; following, a cut connection is opened again after
   * the last event read.
   */
  streamEvents(opts: EventsOptions = {}): Promise<EventStream> {
    return EventStream.open(this.t, opts);
  }

  // Sleep, wake, rewind, branch.

  pause(name: string): Promise<Sandbox> {
    return this.t.json("POST", sb(name, "pause"));
  }
  resume(name: string): Promise<Sandbox> {
    return this.t.json("POST", sb(name, "resume"));
  }
  hibernate(name: string): Promise<Sandbox> {
    return this.t.json("POST", sb(name, "hibernate"));
  }
  recover(name: string, opts: { mode?: "retry" | "cold" | "rollback"; checkpoint?: string } = {}): Promise<Sandbox> {
    return this.t.json("POST", sb(name, "recover"), { json: opts });
  }
  checkpoint(name: string, opts: { name?: string; fs_only?: boolean } = {}): Promise<Checkpoint> {
    return this.t.json("POST", sb(name, "checkpoints"), { json: opts });
  }
  async checkpoints(name: string): Promise<Checkpoint[]> {
    return (await this.t.json<{ checkpoints: Checkpoint[] }>("GET", sb(name, "checkpoints"))).checkpoints;
  }
  getCheckpoint(name: string, ckpt: string): Promise<Checkpoint> {
    return this.t.json("GET", sb(name, "checkpoints", ckpt));
  }
  async removeCheckpoint(name: string, ckpt: string): Promise<void> {
    await this.t.send("DELETE", sb(name, "checkpoints", ckpt));
  }
  restore(name: string, checkpoint: string): Promise<Sandbox> {
    return this.t.json("POST", sb(name, "restore"), { json: { checkpoint } });
  }
  async fork(name: string, opts: { name: string; from?: string; count?: number }): Promise<Sandbox[]> {
    return (await this.t.json<{ sandboxes: Sandbox[] }>("POST", sb(name, "fork"), { json: opts })).sandboxes;
  }

  // Rebase and setup.

  /**
   * Gives a sandbox a new root from an image version (`image`: IMAGE or
   * IMAGE@VERSION; default its own image's newest), carrying its kept
   * paths over and running its setup steps again; its processes end. A
   * failure, a setup step that exits non-zero included, rolls it back to
   * the checkpoint taken first and throws a conflict naming the step.
   */
  rebase(name: string, opts: { image?: string } = {}): Promise<Rebase> {
    return this.t.json("POST", sb(name, "rebase"), { json: opts });
  }
  /** Changes the setup steps and kept paths a rebase uses; a list left out stays, an empty one is cleared. Nothing runs now. */
  setSetup(name: string, req: SetupRequest): Promise<Sandbox> {
    return this.t.json("PUT", sb(name, "setup"), { json: req });
  }

  // The harness: the agent program, apart from its environment.

  /**
   * Gives a sandbox a harness, or swaps the one it has, on the sandbox as
   * it is (`den harness set`): a files-only checkpoint pre-harness-gN
   * first (restoring it undoes the swap), the old harness's services
   * stopped, its steps run, its services started. A failed step rolls it
   * back and throws a conflict naming the step; bad input is invalid.
   */
  setHarness(name: string, harness: Harness): Promise<HarnessSet> {
    return this.t.json("PUT", sb(name, "harness"), { json: harness });
  }
  /** A sandbox's harness (`den harness show`); none throws not found. */
  harness(name: string): Promise<Harness> {
    return this.t.json("GET", sb(name, "harness"));
  }
  /** Stops the harness's services and removes it from the record (`den harness rm`); what its steps installed stays. */
  async removeHarness(name: string): Promise<void> {
    await this.t.send("DELETE", sb(name, "harness"));
  }

  // Export and import: an agent that moves between dens.

  /**
   * Writes a sandbox's record and newest checkpoint as a sealed archive
   * (`den export`): its files and, unless fs_only, its memory and
   * processes. A running or paused sandbox is checkpointed first. key
   * seals it (64 hex digits; default: a fresh one, in the answer). The
   * memory of a sandbox ever granted secrets is a conflict: export it
   * fs_only. Read the archive to its end, e.g. with
   * `pipeline(x.archive, createWriteStream("agent.den"))`.
   */
  async exportSandbox(name: string, opts: { fs_only?: boolean; key?: string; signal?: AbortSignal } = {}): Promise<Export> {
    const res = await this.t.send("POST", sb(name, "export"), {
      query: { fs_only: opts.fs_only || undefined },
      headers: opts.key ? { [archiveKey]: opts.key } : undefined,
      signal: opts.signal,
    });
    const { Readable } = await import("node:stream");
    return {
      archive: Readable.fromWeb(res.body as never),
      key: res.headers.get(archiveKey) || opts.key || "",
      memory: res.headers.get("Den-Archive-Memory") === "true",
      secrets: (res.headers.get("Den-Archive-Secrets") ?? "").split(",").filter((s) => s),
    };
  }
  /**
   * Makes a sandbox of the caller from an archive exportSandbox wrote
   * (`den import`): bytes or a stream (`createReadStream("agent.den")`),
   * sent as it is read, with the key it was sealed with; opts.name is its
   * name here (default: its name in the archive). One exported with
   * memory comes back hibernated and wakes with its processes on first
   * use; one with files only, stopped. The wrong key or a damaged archive
   * is invalid, a secret not set here a conflict naming it: either leaves
   * nothing.
   */
  importSandbox(archive: Uint8Array | AsyncIterable<Uint8Array>, key: string, opts: { name?: string } = {}): Promise<Import> {
    return this.t.json("POST", "/v1/sandboxes/import", {
      query: { name: opts.name },
      headers: { [archiveKey]: key },
      body: archive,
      contentType: "application/vnd.den.agent",
    });
  }

  // Services: long-lived processes den keeps running in a sandbox.

  /**
   * Declares a service den-init keeps running (`den service add`): started
   * at every boot, in the order added, and again by spec.restart ("always",
   * the default, "on-failure", "never"). A running sandbox starts it at once.
   */
  addService(name: string, spec: ServiceSpec): Promise<Service> {
    return this.t.json("POST", sb(name, "services"), { json: spec });
  }
  /** Lists a sandbox's services and their states (`den service ls`). */
  async services(name: string): Promise<Service[]> {
    return (await this.t.json<{ services: Service[] }>("GET", sb(name, "services"))).services;
  }
  /** Stops a service's run and starts it again at once (`den service restart`). */
  async restartService(name: string, service: string): Promise<void> {
    await this.t.send("POST", sb(name, "services", service, "restart"));
  }
  /** Stops a service (SIGTERM, SIGKILL after 5 s) and removes it (`den service rm`). */
  async removeService(name: string, service: string): Promise<void> {
    await this.t.send("DELETE", sb(name, "services", service));
  }

  // Peers: read-only views of other sandboxes' files.

  /**
   * Gives sandbox `name` a read-only view of req.sandbox's files (at
   * req.at, default /peers/OTHER): a snapshot now, of req.checkpoint, or
   * with req.live its files as they are at every read. The view appears
   * while the sandbox runs; one outside /peers needs req.restart on a
   * paused sandbox (its processes end, its files stay).
   * Another owner's sandbox is not_found.
   */
  addPeer(name: string, req: AddPeerRequest): Promise<Peer> {
    return this.t.json("POST", sb(name, "peers"), { json: req });
  }
  async peers(name: string): Promise<Peer[]> {
    return (await this.t.json<{ peers: Peer[] }>("GET", sb(name, "peers"))).peers;
  }
  /** Takes view `peer` (its id, or the other sandbox's name) again: the other sandbox's files now, or req.checkpoint. */
  refreshPeer(name: string, peer: string, req: RefreshPeerRequest = {}): Promise<Peer> {
    return this.t.json("POST", sb(name, "peers", peer, "refresh"), { json: req });
  }
  async removePeer(name: string, peer: string, opts: { restart?: boolean } = {}): Promise<void> {
    await this.t.send("DELETE", sb(name, "peers", peer), { query: { restart: opts.restart || undefined } });
  }

  // Settings.

  setPolicy(name: string, p: Partial<Policy>): Promise<Sandbox> {
    return this.t.json("PATCH", sb(name, "policy"), { json: p });
  }
  setLimits(name: string, l: LimitsRequest): Promise<Sandbox> {
    return this.t.json("PATCH", sb(name, "limits"), { json: l });
  }
  setNetwork(name: string, p: NetworkPolicy): Promise<Sandbox> {
    return this.t.json("PUT", sb(name, "network"), { json: p });
  }
  setSecrets(name: string, grants: SecretGrant[]): Promise<Sandbox> {
    return this.t.json("PUT", sb(name, "secrets"), { json: { grants } });
  }

  // Ports.

  exposePort(name: string, port: number, opts: { public?: boolean } = {}): Promise<Sandbox> {
    return this.t.json("PUT", sb(name, "ports", String(port)), { json: { public: opts.public ?? false } });
  }
  async unexposePort(name: string, port: number): Promise<void> {
    await this.t.send("DELETE", sb(name, "ports", String(port)));
  }
  /** A link to a private port that works without a token until it expires ("1h", "24h"). */
  async portURL(name: string, port: number, opts: { expires?: string } = {}): Promise<PortURL> {
    const u = await this.t.json<PortURL>("GET", sb(name, "ports", String(port), "url"), { query: { expires: opts.expires } });
    if (!u.url && !this.t.dispatcher) u.url = new URL(u.path.replace(/^\//, ""), this.t.base).toString();
    return u;
  }
  async revokePortURLs(name: string, port: number): Promise<void> {
    await this.t.send("DELETE", sb(name, "ports", String(port), "url"));
  }

  // Commands.

  /**
   * Runs a command and streams its output: to io.onStdout/onStderr when
   * given, else gathered into the result's stdout and stderr. Resolves
   * with the run's record when the command ends (exit_code, signal).
   */
  exec(name: string, req: ExecRequest, io?: ExecIO): Promise<ExecResult> {
    return execStream(this.t, name, req, io);
  }
  /** Starts a command in the background and returns its run at once. */
  execDetached(name: string, req: ExecRequest): Promise<Run> {
    return this.t.json("POST", sb(name, "exec"), { json: { ...req, detach: true } });
  }
  async runs(name: string, opts: { limit?: number } = {}): Promise<Run[]> {
    return (await this.t.json<{ runs: Run[] }>("GET", sb(name, "runs"), { query: { limit: opts.limit } })).runs;
  }
  getRun(name: string, run: string): Promise<Run> {
    return this.t.json("GET", sb(name, "runs", run));
  }
  /**
   * A run's output from byte offset `from`; with follow, until the run
   * ends (waking a sleeping sandbox unless wake is false). A followed
   * stream that ends early throws, saying the offset to resume from.
   */
  async logs(name: string, run: string, opts: { stream?: "stdout" | "stderr"; from?: number; follow?: boolean; wake?: boolean; signal?: AbortSignal } = {}): Promise<Readable> {
    const res = await this.t.send("GET", sb(name, "runs", run, "logs"), {
      query: { stream: opts.stream, from: opts.from, follow: opts.follow || undefined, wake: opts.wake === false ? false : undefined },
      signal: opts.signal,
    });
    const { Readable } = await import("node:stream");
    const body = Readable.fromWeb(res.body as never);
    if (!opts.follow) return body;
    // A followed stream ends when the run has; one that ends while the
    // run still goes was cut (dend restarted, the sandbox went to sleep
    // with wake false): say so, with where to resume, never end quietly.
    const getRun = () => this.getRun(name, run);
    const stream = opts.stream ?? "stdout";
    async function* checked() {
      let n = opts.from ?? 0;
      for await (const chunk of body) {
        n += (chunk as Uint8Array).length;
        yield chunk as Uint8Array;
      }
      const r = await getRun();
      if (r.status === "running") {
        throw new DenError(0, {
          code: "unavailable",
          message: `following the ${stream} of run ${run} stopped at byte ${n} while the run still goes`,
          hint: `follow again from there: logs(${JSON.stringify(name)}, ${JSON.stringify(run)}, { follow: true, from: ${n} })`,
        });
      }
    }
    return Readable.from(checked());
  }
  async signal(name: string, run: string, signal = "TERM"): Promise<void> {
    await this.t.send("POST", sb(name, "runs", run, "signal"), { json: { signal } });
  }
  async processes(name: string): Promise<Process[]> {
    return (await this.t.json<{ processes: Process[] }>("GET", sb(name, "processes"))).processes;
  }

  // Files.

  stat(name: string, path: string): Promise<FileInfo> {
    return this.t.json("GET", sb(name, "files", "stat"), { query: { path } });
  }
  async listFiles(name: string, path: string): Promise<FileInfo[]> {
    return (await this.t.json<{ files: FileInfo[] }>("GET", sb(name, "files", "list"), { query: { path } })).files;
  }
  /** A file's contents, whole. */
  async readFile(name: string, path: string): Promise<Uint8Array> {
    const res = await this.t.send("GET", sb(name, "files", "content"), { query: { path } });
    return new Uint8Array(await res.arrayBuffer());
  }
  /** A file's contents as a stream, for large files. */
  async readFileStream(name: string, path: string): Promise<Readable> {
    const res = await this.t.send("GET", sb(name, "files", "content"), { query: { path } });
    const { Readable } = await import("node:stream");
    return Readable.fromWeb(res.body as never);
  }
  /** Creates or replaces a file; data may be a stream (sent as it is read). */
  async writeFile(name: string, path: string, data: string | Uint8Array | AsyncIterable<Uint8Array>, opts: { mode?: number } = {}): Promise<void> {
    await this.t.send("PUT", sb(name, "files", "content"), {
      query: { path, mode: opts.mode === undefined ? undefined : "0" + opts.mode.toString(8) },
      body: data,
      contentType: "application/octet-stream",
    });
  }
  async mkdir(name: string, req: MkdirRequest): Promise<void> {
    await this.t.send("POST", sb(name, "files", "mkdir"), { json: req });
  }
  async move(name: string, from: string, to: string): Promise<void> {
    await this.t.send("POST", sb(name, "files", "move"), { json: { from, to } });
  }
  async removeFile(name: string, path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.t.send("DELETE", sb(name, "files"), { query: { path, recursive: opts.recursive || undefined } });
  }

  // SSH keys of dend's SSH gateway.

  /**
   * Registers a public key (authorized_keys form, as in FILE.pub) for the
   * caller's token: it reaches the SSH gateway with the token's rights
   * until the token is revoked. Root on the socket has no token (invalid).
   */
  addSSHKey(name: string, publicKey: string): Promise<SSHKey> {
    return this.t.json("POST", "/v1/ssh-keys", { json: { name, public_key: publicKey } });
  }
  /** The caller's token's keys (an admin's: every key), oldest first. */
  async listSSHKeys(): Promise<SSHKey[]> {
    return (await this.t.json<{ keys: SSHKey[] }>("GET", "/v1/ssh-keys")).keys;
  }
  /** Removes a key, by its name or fingerprint. */
  async removeSSHKey(ref: string): Promise<void> {
    await this.t.send("DELETE", `/v1/ssh-keys/${encodeURIComponent(ref)}`);
  }

  // Images.

  async listImages(): Promise<Image[]> {
    return (await this.t.json<{ images: Image[] }>("GET", "/v1/images")).images;
  }
  getImage(name: string): Promise<Image> {
    return this.t.json("GET", `/v1/images/${encodeURIComponent(name)}`);
  }
  /** Keeps `count` instances of an image booted ahead of demand on the node
   * that answers, for sandboxes of `memoryBytes` (default: a create's); a
   * create that fits claims one instead of booting. 0 empties the pool. */
  setWarm(image: string, count: number, memoryBytes?: number): Promise<WarmPool> {
    return this.t.json("PUT", `/v1/images/${encodeURIComponent(image)}/warm`, { json: { count, memory_bytes: memoryBytes } });
  }
}
