// The live connection of HelixChat (client.js): drive a connection to its end, re-attach
// from the cursor after a drop with bounded exponential backoff (cut short when the browser
// comes back online), re-anchor on the snapshot after a resync trigger or a typed refusal,
// and settle on the snapshot once the run's stream ended.
//
// Every function takes the chat first and reads or updates its state.

import { HelixRequestError, SnapshotUnavailableError, isNetworkError, parseError, sleep } from "./errors.js";
import { gettext } from "./i18n.js";
import { resumeHeaders } from "./resume.js";
import { reanchorOpen } from "./client-snapshot.js";
import { finishLive, open } from "./client-stream.js";

/** Typed codes after which the client re-reads the snapshot instead of re-attaching. */
const REANCHOR_CODES = new Set(["state_not_resumable", "state_request_already_completed", "stream_failed"]);

/**
 * Drive a connection to its end: re-attach after drops (bounded backoff), re-anchor on
 * triggers and typed refusals, and settle on the snapshot once the run's stream ended.
 * `openFirst()` opens the first request; it returns what open() returns, or `{refused}` to
 * stop without touching the status.
 */
export async function follow(chat, gen, openFirst, { fromSnapshot = false } = {}) {
  let openNext = openFirst;
  let attempt = 0;
  let settles = 0;
  let waits = 0;
  for (;;) {
    let result;
    try {
      result = await openNext();
    } catch (error) {
      if (gen !== chat.gen) return;
      const typed = parseError(error) || { code: "transport_error", error: String(error), retryable: true };
      const status = error instanceof HelixRequestError ? error.status : 0;
      if (fromSnapshot && error instanceof SnapshotUnavailableError && status !== 0) {
        chat.setStatus("error", { kind: "snapshot", ...typed, retryable: true, status });
        return;
      }
      // A stream that failed (409 {error: "stream_failed", code: <the run's failure>}) or a
      // resume the server cannot serve: the snapshot says what happened.
      const reanchor = REANCHOR_CODES.has(typed.code) || typed.error === "stream_failed" || status === 409;
      if (reanchor && settles < 3) {
        settles += 1;
        openNext = () => reanchorOpen(chat, gen);
        continue;
      }
      if (isNetworkError(error) || (typed.retryable && status >= 500)) {
        result = { dropped: true, received: 0 };
      } else {
        chat.setStatus("error", { kind: fromSnapshot || !chat.loaded ? "snapshot" : "stream", ...typed, status });
        return;
      }
    }
    if (result.stale || result.refused || gen !== chat.gen) return;
    fromSnapshot = false;
    if (result.queued) {
      openNext = () => reanchorOpen(chat, gen); // the live answer goes on: follow it again
      continue;
    }
    if (result.reanchor) {
      chat.abortConnection();
      openNext = () => reanchorOpen(chat, gen);
      continue;
    }
    if (result.settled && chat.queued.length && waits < 15) {
      // The answer ended and a queued message starts right after it: show its turn live.
      waits += 1;
      await sleep(200);
      if (gen !== chat.gen) return;
      openNext = () => reanchorOpen(chat, gen);
      continue;
    }
    if (result.settled) {
      finishLive(chat);
      chat.setStatus("ready");
      return;
    }
    if (result.terminal || result.empty) {
      // The run's stream ended: the snapshot is the truth (status, partial flags, runId).
      settles += 1;
      if (settles > 4) {
        finishLive(chat);
        chat.setStatus("ready");
        return;
      }
      if (settles > 1) await sleep(150 * settles);
      openNext = () => reanchorOpen(chat, gen);
      continue;
    }
    // A drop: the body ended without a terminal frame, or the request failed.
    attempt = result.received > 0 ? 1 : attempt + 1;
    if (attempt > chat.reattach.maxAttempts) {
      chat.setStatus("error", {
        // Without any snapshot read the page has nothing to show: an error state, not an empty chat.
        kind: chat.loaded ? "stream" : "snapshot",
        code: "transport_stream_drop",
        error: gettext("The connection to the server was lost"),
        retryable: true,
        status: 0,
      });
      return;
    }
    chat.setStatus("reconnecting");
    const delay = Math.min(chat.reattach.maxDelayMs, chat.reattach.baseDelayMs * 2 ** (attempt - 1));
    await backoff(chat, delay);
    if (gen !== chat.gen) return;
    openNext =
      chat.live && chat.cursorTrusted
        ? () =>
            open(chat, gen, "GET", resumeHeaders({ resumeFromSequence: chat.cursor, existingMessageId: chat.live.message.id }))
        : () => reanchorOpen(chat, gen);
  }
}

/** Wait `ms`, or less when `chat.wake()` is called (back online, or a new generation). */
export function backoff(chat, ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      resolve();
    }
    chat.wake = () => {
      chat.wake = null;
      done();
    };
  });
}
