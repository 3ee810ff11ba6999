// Typed wire errors and the snapshot fetch with retries (002, "Wire errors",
// "Fetching the snapshot from the browser").
//
// Every refusal of the server is a flat JSON body
//   { error: string, code: string, retryable?: boolean, cause?: string, ...extra }
// parseError() reads one from anything a request can fail with. The `error` texts the client
// makes itself are translated (i18n.js); codes stay English identifiers.

import { gettext } from "./i18n.js";

/** A non-2xx answer (or a failed fetch) with its typed body. */
export class HelixRequestError extends Error {
  /**
   * @param {{error?: string, code: string, retryable?: boolean, cause?: string}} body
   * @param {number} status  HTTP status, 0 for a network failure
   */
  constructor(body, status) {
    super(body.error || body.code);
    this.name = "HelixRequestError";
    this.body = body;
    this.code = body.code;
    this.retryable = Boolean(body.retryable);
    this.cause = body.cause;
    this.status = status;
  }
}

/** The snapshot could not be read after the retries: render an error state, never an empty chat. */
export class SnapshotUnavailableError extends HelixRequestError {
  constructor(body, status) {
    super(body, status);
    this.name = "SnapshotUnavailableError";
    this.reason = body.cause;
  }
}

/**
 * Read a typed error body from an Error, a body object, or a JSON string.
 * @returns {{error?: string, code: string, retryable?: boolean, cause?: string} | undefined}
 *   undefined for an error that carries no typed body.
 */
export function parseError(value) {
  if (value == null) return undefined;
  if (value instanceof HelixRequestError) return { ...value.body, retryable: value.retryable };
  if (typeof value === "string") {
    try {
      return parseError(JSON.parse(value));
    } catch {
      return undefined;
    }
  }
  if (value instanceof Error) return parseError(value.message);
  if (typeof value === "object" && typeof value.code === "string") {
    const body = { ...value };
    body.retryable = Boolean(value.retryable);
    return body;
  }
  if (typeof value === "object" && typeof value.error === "string" && value.error === "stream_failed") {
    return { ...value, code: "stream_failed", retryable: Boolean(value.retryable) };
  }
  return undefined;
}

/** Whether `error` is a network failure (fetch rejected: offline, refused, reset). */
export function isNetworkError(error) {
  return error instanceof TypeError || (error instanceof HelixRequestError && error.status === 0);
}

/** Build a HelixRequestError from a non-2xx Response (the body is read once). */
export async function responseError(response) {
  let body;
  try {
    body = parseError(await response.text());
  } catch {
    body = undefined;
  }
  if (!body) {
    body = {
      error: `HTTP ${response.status}`,
      code: response.status >= 500 ? "transport_error" : "http_error",
      retryable: response.status >= 500 || response.status === 429,
    };
  }
  return new HelixRequestError(body, response.status);
}

/** The typed error for a fetch that rejected before any answer. */
export function networkError() {
  return new HelixRequestError(
    { error: gettext("The server could not be reached"), code: "network_error", retryable: true, cause: "network" },
    0,
  );
}

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason ?? new DOMException("Aborted", "AbortError"));
      },
      { once: true },
    );
  });

/**
 * Fetch a snapshot, retrying a 5xx, a 429 or a network failure: 4 fetches in total with
 * 250 / 500 / 1000 ms between them (002, "Fetching the snapshot from the browser").
 *
 * @param {string} url
 * @param {{fetch?: typeof fetch, backoffMs?: number[], signal?: AbortSignal, headers?: object}} [options]
 * @returns {Promise<object|null>} the snapshot, or null for a 404 (no such session)
 * @throws {SnapshotUnavailableError} after the retries, at once for another 4xx or a body
 *   that is not a snapshot (cause `invalid_json` / `invalid_body`)
 */
export async function fetchSnapshotWithRetry(url, options = {}) {
  const doFetch = options.fetch || globalThis.fetch.bind(globalThis);
  const backoffMs = options.backoffMs || [250, 500, 1000];
  let last = null;
  for (let attempt = 0; attempt <= backoffMs.length; attempt += 1) {
    if (attempt > 0) await sleep(backoffMs[attempt - 1], options.signal);
    let response;
    try {
      response = await doFetch(url, {
        headers: { Accept: "application/json", ...(options.headers || {}) },
        credentials: "same-origin",
        cache: "no-store",
        signal: options.signal,
      });
    } catch (error) {
      if (error?.name === "AbortError") throw error;
      last = networkError();
      continue;
    }
    if (response.status === 404) return null;
    if (!response.ok) {
      const error = await responseError(response);
      last = new SnapshotUnavailableError(error.body, response.status);
      if (response.status >= 500 || response.status === 429) continue;
      throw last;
    }
    let body;
    try {
      body = await response.json();
    } catch {
      throw new SnapshotUnavailableError(
        { error: gettext("The snapshot is not JSON"), code: "transport_error", cause: "invalid_json", retryable: true },
        response.status,
      );
    }
    if (!body || !Array.isArray(body.messages) || typeof body.streamSequence !== "number") {
      throw new SnapshotUnavailableError(
        { error: gettext("The answer is not a snapshot"), code: "transport_error", cause: "invalid_body", retryable: true },
        response.status,
      );
    }
    return body;
  }
  throw last instanceof SnapshotUnavailableError ? last : new SnapshotUnavailableError(last.body, last.status);
}

export { sleep };
