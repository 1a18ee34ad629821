// HTTP to dend over TCP with a bearer token or over its unix socket, with
// an idempotency key on every change and the real outcome after a dropped
// connection (as the Go SDK's retry.go does).
import { randomBytes } from "node:crypto";
import { Agent, Response, fetch, type Dispatcher } from "undici";

import { DenError, OutcomeUnknownError, errorOf, type WireError } from "./errors.js";

export interface TransportOptions {
  /** dend's TCP address, e.g. http://10.0.0.5:7070. */
  host?: string;
  /** Bearer token for host. */
  token?: string;
  /** dend's unix socket (root only; no token). */
  socket?: string;
  /** How long a change keeps asking dend after its connection dropped (ms). */
  reconnectMs?: number;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  json?: unknown;
  /** A raw body; a stream cannot be sent again after a dropped connection. */
  body?: Uint8Array | string | AsyncIterable<Uint8Array>;
  contentType?: string;
  /** Headers of the request's own, besides den's. */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

const firstBackoff = 100;
const maxBackoff = 2000;

export class Transport {
  readonly base: URL;
  readonly token: string;
  readonly dispatcher: Dispatcher | undefined;
  readonly reconnectMs: number;

  constructor(opts: TransportOptions) {
    if (opts.host) {
      this.base = new URL(opts.host.endsWith("/") ? opts.host : opts.host + "/");
      this.token = opts.token ?? "";
    } else {
      // Over the socket every URL goes to it; the host name is a label.
      this.base = new URL("http://den/");
      this.token = "";
      this.dispatcher = new Agent({ connect: { socketPath: opts.socket ?? "/run/den/den.sock" } });
    }
    this.reconnectMs = opts.reconnectMs ?? 30_000;
  }

  url(path: string, query?: RequestOptions["query"], scheme?: "ws"): URL {
    const u = new URL(path.replace(/^\//, ""), this.base);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined) u.searchParams.set(k, String(v));
    }
    if (scheme === "ws") u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    return u;
  }

  headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { "User-Agent": "den-ts-sdk", ...extra };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /** Sends a request and returns its answer, throwing den's error on a non-2xx one. */
  async send(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const changes = method !== "GET" && method !== "HEAD";
    const key = changes ? randomBytes(16).toString("hex") : "";
    const replayable = !(opts.body && typeof opts.body === "object" && Symbol.asyncIterator in opts.body);
    const attempt = () => this.once(method, path, opts, key);
    let res: Response;
    try {
      res = await attempt();
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      if (!changes || neverSent(err)) throw unreachable(this, err);
      res = await this.reconnect(method, path, key, replayable ? attempt : undefined, err);
    }
    if (!res.ok) throw errorOf(res.status, await res.text());
    return res;
  }

  async json<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, path, opts);
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }

  private once(method: string, path: string, opts: RequestOptions, key: string): Promise<Response> {
    const extra: Record<string, string> = { ...opts.headers };
    let body: RequestOptions["body"] | undefined = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      extra["Content-Type"] = "application/json";
    } else if (opts.contentType) {
      extra["Content-Type"] = opts.contentType;
    }
    if (key) extra["Idempotency-Key"] = key;
    return fetch(this.url(path, opts.query), {
      method,
      headers: this.headers(extra),
      body: body as never,
      signal: opts.signal,
      dispatcher: this.dispatcher,
      duplex: body && typeof body === "object" && Symbol.asyncIterator in body ? "half" : undefined,
    } as never);
  }

  /**
   * Learns what became of a change whose connection dropped: sends it
   * again with the same key when it can, else asks /v1/requests/{key},
   * until dend answers or reconnectMs passes.
   */
  private async reconnect(method: string, path: string, key: string, again: (() => Promise<Response>) | undefined, cause: unknown): Promise<Response> {
    const what = `${method} ${path}`;
    const deadline = Date.now() + this.reconnectMs;
    for (let delay = firstBackoff; ; delay = Math.min(2 * delay, maxBackoff)) {
      if (Date.now() + delay > deadline) {
        throw new OutcomeUnknownError({
          code: "unavailable",
          message: `lost the connection to dend during ${what}, and it did not come back within ${this.reconnectMs / 1000}s: the change may or may not have happened`,
          hint: `check the sandbox's state, or GET /v1/requests/${key} once dend is back`,
        }, key, { cause });
      }
      await new Promise((r) => setTimeout(r, delay));
      let res: Response;
      try {
        res = again ? await again() : await this.once("GET", `/v1/requests/${key}`, {}, "");
      } catch (err) {
        cause = err;
        continue; // dend is not back yet
      }
      if (again) {
        const status = res.headers.get("idempotency-status");
        if (status === "in-progress") continue;
        if (status === "interrupted") throw interrupted(res.status, await res.text(), key);
        return res;
      }
      if (res.status === 404) {
        throw new DenError(0, {
          code: "unavailable",
          message: `lost the connection to dend before it took ${what}: nothing happened`,
          hint: "send it again",
        }, { cause });
      }
      if (!res.ok) return res;
      const st = (await res.json()) as { state: string; status?: number; response?: unknown; error?: WireError };
      if (st.state === "in_progress") continue;
      if (st.state === "interrupted") {
        throw new OutcomeUnknownError(st.error ?? { code: "conflict", message: `dend stopped during ${what}: it may or may not have happened` }, key);
      }
      return new Response(JSON.stringify(st.response ?? {}), {
        status: st.status ?? 200,
        headers: { "Content-Type": "application/json" },
      });
    }
  }
}

function interrupted(status: number, text: string, key: string): OutcomeUnknownError {
  const e = errorOf(status, text);
  return new OutcomeUnknownError({ code: e.code, message: e.message.replace(/ \(hint: .*\)$/, ""), hint: e.hint }, key);
}

/** A connection that was refused never carried the request. */
function neverSent(err: unknown): boolean {
  const code = (err as { cause?: { code?: string } })?.cause?.code;
  return code === "ECONNREFUSED" || code === "ENOENT" || code === "EACCES";
}

function unreachable(t: Transport, err: unknown): DenError {
  if (err instanceof DenError) return err;
  const where = t.dispatcher ? "dend's unix socket" : t.base.origin;
  const code = (err as { cause?: { code?: string } })?.cause?.code ?? "";
  return new DenError(0, {
    code: "unavailable",
    message: `cannot reach dend at ${where}${code ? ` (${code})` : ""}: ${(err as Error).message}`,
    hint: t.dispatcher ? "is dend running? set DEN_SOCKET, or DEN_HOST and DEN_TOKEN" : "is dend running and listening there (dend --listen)?",
  }, { cause: err });
}
