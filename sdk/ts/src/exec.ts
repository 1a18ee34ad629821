// The exec stream: a WebSocket at /v1/sandboxes/{name}/exec/ws. The
// client sends the ExecRequest as one text message; then every binary
// message is one byte of frame kind and its payload (api/stream.go).
import { WebSocket } from "undici";

import { DenError, type WireError } from "./errors.js";
import type { Transport } from "./transport.js";
import type { ExecRequest, Run } from "./types.js";

const Frame = {
  stdout: 1,
  stderr: 2,
  started: 3,
  exit: 4,
  error: 5,
  stdin: 10,
  stdinEOF: 11,
  resize: 12,
  signal: 13,
} as const;

export interface ExecIO {
  /** Sent to the command, then end-of-file. */
  stdin?: string | Uint8Array | AsyncIterable<Uint8Array | string>;
  /** Called with each piece of output as it comes. */
  onStdout?: (chunk: Uint8Array) => void;
  onStderr?: (chunk: Uint8Array) => void;
  /** Called with the run's record once the command started. */
  onStarted?: (run: Run) => void;
  /** Aborting sends the command SIGTERM... and detaches when asked twice. */
  signal?: AbortSignal;
}

/** The record of the run, its output gathered when no callback took it. */
export interface ExecResult extends Run {
  stdout: string;
  stderr: string;
}

const enc = new TextEncoder();

export function execStream(t: Transport, name: string, req: ExecRequest, io: ExecIO = {}): Promise<ExecResult> {
  const path = `/v1/sandboxes/${encodeURIComponent(name)}/exec/ws`;
  const url = t.url(path, undefined, "ws");
  const ws = new WebSocket(url, { headers: t.headers(), dispatcher: t.dispatcher } as never);
  ws.binaryType = "arraybuffer";
  const out: Uint8Array[] = [];
  const errs: Uint8Array[] = [];
  const dec = (parts: Uint8Array[]) => Buffer.concat(parts).toString("utf8");

  return new Promise<ExecResult>((resolve, reject) => {
    let done = false;
    const finish = (err: Error | undefined, run?: Run) => {
      if (done) return;
      done = true;
      io.signal?.removeEventListener("abort", onAbort);
      if (ws.readyState === ws.OPEN) ws.close(1000);
      if (err) reject(err);
      else resolve({ ...(run as Run), stdout: dec(out), stderr: dec(errs) });
    };
    const send = (kind: number, payload: Uint8Array = new Uint8Array()) => {
      const b = new Uint8Array(1 + payload.length);
      b[0] = kind;
      b.set(payload, 1);
      ws.send(b);
    };
    const onAbort = () => {
      if (ws.readyState === ws.OPEN) send(Frame.signal, enc.encode(JSON.stringify({ signal: "TERM" })));
    };
    io.signal?.addEventListener("abort", onAbort);

    ws.addEventListener("open", () => {
      ws.send(JSON.stringify({ ...req, stdin: req.stdin ?? io.stdin !== undefined }));
      if (io.stdin !== undefined) {
        void pump(io.stdin, (b) => send(Frame.stdin, b)).then(
          () => ws.readyState === ws.OPEN && send(Frame.stdinEOF),
          (err) => finish(new DenError(0, { code: "invalid", message: `reading stdin for the command: ${err}` })),
        );
      }
    });
    ws.addEventListener("message", (ev) => {
      if (typeof ev.data === "string") return;
      const b = new Uint8Array(ev.data as ArrayBuffer);
      const payload = b.subarray(1);
      switch (b[0]) {
        case Frame.stdout:
          if (io.onStdout) io.onStdout(payload);
          else out.push(Buffer.from(payload));
          break;
        case Frame.stderr:
          if (io.onStderr) io.onStderr(payload);
          else errs.push(Buffer.from(payload));
          break;
        case Frame.started:
          io.onStarted?.(JSON.parse(Buffer.from(payload).toString("utf8")) as Run);
          break;
        case Frame.exit:
          finish(undefined, JSON.parse(Buffer.from(payload).toString("utf8")) as Run);
          break;
        case Frame.error: {
          const e = JSON.parse(Buffer.from(payload).toString("utf8")) as WireError;
          finish(new DenError(0, e));
          break;
        }
      }
    });
    let opened = false;
    ws.addEventListener("open", () => (opened = true));
    ws.addEventListener("error", (ev) => {
      const e = (ev as unknown as { error?: Error }).error;
      const failed = new DenError(0, {
        code: "unavailable",
        message: `the exec stream to sandbox ${name} failed: ${e?.message ?? "connection error"}`,
        hint: opened ? `the command may still run: see \`den runs ${name}\`` : "is dend running, and is the token right?",
      });
      if (opened) return finish(failed);
      // Refused before the stream began: the WebSocket does not show
      // dend's answer, so ask the same route without the upgrade, which
      // gets the same refusal (unknown sandbox, bad token).
      t.send("GET", path).then(
        () => finish(failed),
        (err) => finish(err instanceof DenError && !/WebSocket/.test(err.message) ? err : failed),
      );
    });
    ws.addEventListener("close", (ev) => {
      if (done) return;
      // A refusal before the stream began: dend answers with an HTTP
      // error, which the WebSocket only reports as a failed handshake.
      finish(new DenError(0, {
        code: "unavailable",
        message: `the exec stream to sandbox ${name} closed before the command ended (${ev.code}${ev.reason ? ": " + ev.reason : ""})`,
        hint: `the command may still run: see \`den runs ${name}\``,
      }));
    });
  });
}

async function pump(src: NonNullable<ExecIO["stdin"]>, write: (b: Uint8Array) => void) {
  if (typeof src === "string") src = enc.encode(src);
  if (src instanceof Uint8Array) {
    for (let i = 0; i < src.length; i += 32 << 10) write(src.subarray(i, i + (32 << 10)));
    return;
  }
  for await (const chunk of src) write(typeof chunk === "string" ? enc.encode(chunk) : chunk);
}
