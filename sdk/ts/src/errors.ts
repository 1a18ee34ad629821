// den's errors. Every error dend answers is a DenError of one class by
// its code; `hint` says how to fix it.

/** The wire error of a non-2xx answer: `{"error": {code, message, hint}}`. */
export interface WireError {
  code: string;
  message: string;
  hint?: string;
}

/** An error dend answered, or a failure to reach it. */
export class DenError extends Error {
  /** den's error code: invalid, not_found, conflict, quota_exceeded, ... */
  readonly code: string;
  /** How to fix it, when dend knows. */
  readonly hint: string;
  /** The HTTP status, or 0 when dend was not reached. */
  readonly status: number;

  constructor(status: number, err: WireError, options?: { cause?: unknown }) {
    super(err.hint ? `${err.message} (hint: ${err.hint})` : err.message, options);
    this.name = "DenError";
    this.code = err.code;
    this.hint = err.hint ?? "";
    this.status = status;
  }
}

/**
 * The connection to dend dropped while a change was under way, and dend
 * could not tell whether it took effect. `hint` says what to check;
 * `requestKey` is the request's idempotency key for `client.request()`.
 */
export class OutcomeUnknownError extends DenError {
  readonly requestKey: string;
  constructor(err: WireError, requestKey: string, options?: { cause?: unknown }) {
    super(0, err, options);
    this.name = "OutcomeUnknownError";
    this.requestKey = requestKey;
  }
}

/** True when err is a DenError with one of the codes. */
export function isDenError(err: unknown, ...codes: string[]): err is DenError {
  return err instanceof DenError && (codes.length === 0 || codes.includes(err.code));
}

export const isNotFound = (err: unknown) => isDenError(err, "not_found");
export const isConflict = (err: unknown) => isDenError(err, "conflict");
export const isInvalid = (err: unknown) => isDenError(err, "invalid");

/** The DenError of a non-2xx answer whose body was `text`. */
export function errorOf(status: number, text: string): DenError {
  try {
    const body = JSON.parse(text) as { error?: WireError };
    if (body.error?.code) {
      return new DenError(status, body.error);
    }
  } catch {
    // not den's JSON: a proxy in between, most likely
  }
  return new DenError(status, { code: codeOf(status), message: `dend answered ${status}: ${text.slice(0, 200).trim()}` });
}

function codeOf(status: number): string {
  switch (status) {
    case 400:
    case 405:
      return "invalid";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 409:
      return "conflict";
    case 413:
      return "too_large";
    case 502:
    case 503:
    case 504:
      return "unavailable";
  }
  return "internal";
}
