// GET /v1/events: what happens to sandboxes, as it happens. dend sends
// Server-Sent Events, one `data:` line of a StreamEvent in JSON per event
// (its id inside), and comment lines while nothing happens. Following, a
// stream cut short is opened again after the last event received, and
// dend sends what was missed first, or a "gap" event when it no longer
// keeps it (as the Go SDK's StreamEvents does).
import type { ReadableStream } from "node:stream/web";
import type { Response } from "undici";

import { DenError } from "./errors.js";
import type { Transport } from "./transport.js";
import type { StreamEvent } from "./types.js";

export interface EventsOptions {
  /** One sandbox's events (name or id); default: every one the caller may see. */
  sandbox?: string;
  /** Resume after this event id; "0" starts from the oldest event dend keeps; default: from now. */
  after?: string;
  /** Keep following as events happen (default); false ends once what dend keeps was read. */
  follow?: boolean;
  /** Aborting stops the stream: the iteration ends quietly. */
  signal?: AbortSignal;
}

const firstBackoff = 100;
const maxBackoff = 2000;

/**
 * The events of GET /v1/events, as an async iterable. `lastId` is the id
 * of the last event read: `streamEvents({ after: stream.lastId })` resumes
 * there. Following, a cut is mended for up to the client's reconnectMs,
 * then iterating throws an unavailable DenError.
 */
export class EventStream implements AsyncIterable<StreamEvent> {
  lastId: string;
  private res: Response | undefined;
  private readonly follow: boolean;

  private constructor(private readonly t: Transport, private readonly opts: EventsOptions) {
    this.lastId = opts.after ?? "";
    this.follow = opts.follow ?? true;
  }

  /** Opens the stream: dend's refusal (an unknown sandbox: not_found) throws here. */
  static async open(t: Transport, opts: EventsOptions): Promise<EventStream> {
    const s = new EventStream(t, opts);
    s.res = await s.send();
    return s;
  }

  private send(): Promise<Response> {
    return this.t.send("GET", "/v1/events", {
      query: { sandbox: this.opts.sandbox || undefined, after: this.lastId || undefined, follow: this.follow ? undefined : false },
      signal: this.opts.signal,
    });
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamEvent> {
    try {
      for (;;) {
        if (!this.res) this.res = await this.reopen();
        const body = this.res.body;
        try {
          if (body) {
            for await (const ev of readSSE(body)) {
              if (ev.id) this.lastId = ev.id;
              yield ev;
            }
          }
        } catch (err) {
          if (this.opts.signal?.aborted) return;
          if (!this.follow) {
            throw new DenError(0, {
              code: "unavailable",
              message: `the connection to dend ended while reading events: ${(err as Error).message}`,
              hint: `read them again from there: streamEvents({ after: ${JSON.stringify(this.lastId)}, follow: false })`,
            }, { cause: err });
          }
        }
        this.res = undefined;
        if (!this.follow || this.opts.signal?.aborted) return;
      }
    } finally {
      await this.close();
    }
  }

  /** Opens the stream again after the last event read, backing off, until dend answers or reconnectMs passes. */
  private async reopen(): Promise<Response> {
    if (!this.lastId) this.lastId = "0"; // what happened while reconnecting
    const deadline = Date.now() + this.t.reconnectMs;
    for (let delay = firstBackoff; ; delay = Math.min(2 * delay, maxBackoff)) {
      try {
        return await this.send();
      } catch (err) {
        if (!(err instanceof DenError) || err.code !== "unavailable" || this.opts.signal?.aborted) throw err;
        if (Date.now() + delay > deadline) {
          throw new DenError(0, {
            code: "unavailable",
            message: `following events stopped: dend did not come back within ${this.t.reconnectMs / 1000}s (${err.message})`,
            hint: `resume once it is back: streamEvents({ after: ${JSON.stringify(this.lastId)} })`,
          }, { cause: err });
        }
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /** Stops reading and closes the connection. */
  async close(): Promise<void> {
    const res = this.res;
    this.res = undefined;
    await res?.body?.cancel().catch(() => {});
  }
}

/** The events of a Server-Sent Events body: each event's data lines, as JSON. */
async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamEvent> {
  const dec = new TextDecoder();
  let buf = "";
  let data: string[] = [];
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, "");
        buf = buf.slice(nl + 1);
        if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        } else if (line === "" && data.length > 0) {
          const ev = JSON.parse(data.join("\n")) as StreamEvent;
          data = [];
          yield ev;
        }
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
