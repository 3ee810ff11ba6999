// The AI SDK kit's re-attach policy (useHelixChat, react.js): how long to wait before the
// next attempt after a drop, and whether a recorded failure is one a re-attach can mend.

/**
 * The wait before re-attach attempt `attempt` (1-based), in ms: exponential from
 * `baseDelayMs`, capped at `maxDelayMs`, with jitter (50-100 % of it), and never shorter
 * than a server's `Retry-After`.
 */
export function reattachDelay(
  attempt,
  { baseDelayMs = 400, maxDelayMs = 8000, retryAfterSeconds = 0, random = Math.random } = {},
) {
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.max(ceiling * (0.5 + random() / 2), retryAfterSeconds * 1000);
}

/**
 * Resolve after `ms`, or as soon as the browser fires `online` (`events`: any
 * EventTarget, `window` by default); reject with an AbortError when `signal` aborts.
 */
export function waitForReattach(ms, { signal, events = globalThis } = {}) {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      events?.removeEventListener?.("online", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    events?.addEventListener?.("online", done, { once: true });
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        events?.removeEventListener?.("online", done);
        reject(signal.reason ?? new DOMException("Aborted", "AbortError"));
      },
      { once: true },
    );
  });
}

/**
 * Whether the last failure `state` recorded is one a re-attach can mend: a dropped
 * connection or body, or a retryable server answer (5xx, 429). A refusal (4xx) is not.
 */
export function isReattachable(state) {
  const failure = state?.failure;
  if (!failure) return false;
  return failure.kind === "network" || failure.status >= 500 || failure.status === 429;
}
