// The AI SDK client kit: helpers that wire `DefaultChatTransport` / `useChat` to the chat
// route (002, "The canonical client"). Plain ES module, no dependency and no build step:
// server-rendered pages import it from /static/helix_django/aisdk.js; the npm package of
// this folder (package.json) exports it as "helix-ai-sdk", and its "./react" entry
// (react.js) adds `useHelixChat` and binds `helixTransport` to `ai`'s DefaultChatTransport.
//
//   const transport = helixTransport({ sessionId, target, DefaultChatTransport });
//   // transport.helix: { state: {cursor, messageId, failure}, stop(), checkStatus(runId?),
//   //                    continueRun(runId?), keep(runId?), discard(runId?),
//   //                    regenerate(runId?), recovery(runId?), snapshotUrl, routes }
//
// What the pieces do:
//   createCursorFetch        records each SSE frame's `id:` (the stream sequence) as the
//                            cursor and the live message id; a body that ends without a
//                            terminal frame fails as a network error (a drop, never "done")
//   prepareHelixChatRequest  one X-Helix-Request-Key per user message (a retry reuses it),
//                            the CSRF header of Django's session auth
//   prepareHelixReconnectRequest  the resume headers: the recorded cursor and message with
//                            the replay prefix, else the snapshot's target; per-request wins
//   fetchSnapshot, reanchorChat, stopRun, parseHelixChatError
//   checkRunStatus, continueRun, keepRun, discardRun, regenerateRun, recoveryInventory
//                            the recovery routes of an interrupted run (recovery.js)
//   queueMessage, removeQueuedMessage, queuedMessagesOf  messages sent while an answer is
//                            live, stored to start after it (multitask enqueue; queue.js)
//   holdsTurn, lastUserMessageId  whether the server received the chat's last send
//   reattachDelay, waitForReattach, isReattachable  the re-attach policy (reattach.js)
//   isResyncTrigger          the resync triggers HelixChat re-anchors on (client.js, the
//                            same function): data-attempt-superseded, data-stream-resync,
//                            data-tool-output-elsewhere

import { csrfHeaders } from "./csrf.js";
import { fetchSnapshotWithRetry, parseError } from "./errors.js";
import { newRequestKey } from "./ids.js";
import { resumeHeaders, snapshotResumeOptions } from "./resume.js";
import { routesFor } from "./routes.js";
import { queueMessage, removeQueuedMessage } from "./queue.js";
import { checkRunStatus, continueRun, discardRun, keepRun, recoveryInventory, regenerateRun } from "./recovery.js";
import { readEventStream } from "./sse.js";

export { csrfHeaders } from "./csrf.js";
export { HelixRequestError, SnapshotUnavailableError } from "./errors.js";
export { newMessageId, newRequestKey } from "./ids.js";
export { isReattachable, reattachDelay, waitForReattach } from "./reattach.js";
export {
  RECOVERY_ACTIONS,
  checkRunStatus,
  continueRun,
  discardRun,
  keepRun,
  recoveryInventory,
  regenerateRun,
  runAction,
} from "./recovery.js";
export { MULTITASK_STRATEGIES, queueMessage, queuedMessagesOf, removeQueuedMessage } from "./queue.js";
export { RESYNC_TRIGGERS, isResyncTrigger, resumeHeaders, snapshotResumeOptions, triggerIdentity } from "./resume.js";
export { routesFor } from "./routes.js";

/** Chunk types after which a response is complete (anything else ending the body is a drop). */
const TERMINAL_TYPES = new Set(["finish", "error", "abort"]);

/**
 * What a kit transport recorded about its chat's responses.
 * @typedef {{
 *   cursor: number | null,
 *   messageId: string | null,
 *   failure: null | {kind: "network"} | {kind: "refused", status: number, retryAfterSeconds?: number},
 * }} HelixStreamState
 *   cursor: the last stream sequence received; messageId: the message the open answer
 *   writes (null once a response ended with its terminal frame); failure: how the last
 *   response failed (a dropped connection or body, or a non-2xx answer), null when it did not.
 */

/** @returns {HelixStreamState} */
export function newStreamState() {
  return { cursor: null, messageId: null, failure: null };
}

const valueOf = (option) => (typeof option === "function" ? option() : option);

const parseChunk = (data) => {
  try {
    return JSON.parse(data);
  } catch {
    return null;
  }
};

/**
 * A fetch for DefaultChatTransport that passes every byte through and records, in `state`,
 * each frame's `id:` as the cursor and the `start` chunk's message id.
 *
 * The body is pulled on demand, so an id is recorded when the AI SDK reads its bytes. A
 * body that ends without `finish` / `error` / `abort` / `[DONE]` is failed with a
 * TypeError ("network error ..."), which the AI SDK treats as a disconnect.
 * @param {{state?: HelixStreamState, fetch?: typeof fetch}} [options]
 * @returns {typeof fetch}
 */
export function createCursorFetch({ state = newStreamState(), fetch: baseFetch } = {}) {
  const doFetch = baseFetch || globalThis.fetch.bind(globalThis);
  return async (input, init) => {
    let response;
    try {
      response = await doFetch(input, init);
    } catch (error) {
      if (error?.name !== "AbortError") state.failure = { kind: "network" };
      throw error;
    }
    if (!response.ok) {
      const retryAfter = Number(response.headers.get("retry-after"));
      state.failure = { kind: "refused", status: response.status, ...(retryAfter > 0 && { retryAfterSeconds: retryAfter }) };
      return response;
    }
    state.failure = null;
    const type = response.headers.get("content-type") || "";
    if (!response.body || !type.includes("text/event-stream")) return response;
    return new Response(recordFrames(response.body, state), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

function recordFrames(source, state) {
  const frames = new TransformStream();
  const writer = frames.writable.getWriter();
  let terminal = false;
  const parsed = (async () => {
    for await (const frame of readEventStream(frames.readable)) {
      const sequence = Number(frame.id);
      if (frame.id !== null && Number.isInteger(sequence) && sequence > (state.cursor ?? -1)) state.cursor = sequence;
      if (frame.data === "[DONE]") {
        terminal = true;
        continue;
      }
      const chunk = parseChunk(frame.data);
      if (chunk?.type === "start" && chunk.messageId) state.messageId = chunk.messageId;
      if (TERMINAL_TYPES.has(chunk?.type)) terminal = true;
    }
  })();
  parsed.catch(() => {});
  const reader = source.getReader();
  return new ReadableStream(
    {
      async pull(controller) {
        let result;
        try {
          result = await reader.read();
        } catch (error) {
          state.failure = { kind: "network" };
          await writer.abort(error).catch(() => {});
          controller.error(error);
          return;
        }
        if (result.done) {
          await writer.close().catch(() => {});
          await parsed.catch(() => {});
          if (terminal) {
            state.messageId = null;
            controller.close();
          } else {
            state.failure = { kind: "network" };
            controller.error(new TypeError("network error: the stream ended without its terminal frame"));
          }
          return;
        }
        await writer.write(result.value);
        controller.enqueue(result.value);
      },
      cancel(reason) {
        writer.abort(reason).catch(() => {});
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * `prepareSendMessagesRequest` for the chat route: the body DefaultChatTransport sends,
 * the CSRF header and one request key per user message (a retry of the same message,
 * `chat.regenerate()` with it last, reuses its key; regenerating an answer mints a new one).
 * @param {{api: string, headers?: Record<string, string> | (() => Record<string, string>)}} options
 */
export function prepareHelixChatRequest({ api, headers: extra } = {}) {
  const keys = new Map();
  return ({ id, messages, trigger, messageId, headers, body }) => {
    const last = messages[messages.length - 1];
    let key = last?.role === "user" ? keys.get(last.id) : undefined;
    if (!key) {
      key = newRequestKey();
      if (last?.role === "user") keys.set(last.id, key);
    }
    return {
      api,
      headers: { ...csrfHeaders(), ...valueOf(extra), ...headers, "X-Helix-Request-Key": key },
      body: { ...body, id, messages, trigger, messageId },
    };
  };
}

/**
 * `prepareReconnectToStreamRequest` for the chat route. While `state` holds an open
 * answer's message id (after a drop), the resume asks for that message with the replay
 * prefix from the recorded cursor; otherwise for the configured target (values or getters:
 * `resumeFromSequence`, `existingMessageId`, `replayPrefix`, as snapshotResumeOptions gives
 * them). Headers passed to `chat.resumeStream({ headers })` win over both.
 * `headers` (a value or a getter) are sent with every resume.
 * @param {{api: string, state?: HelixStreamState, headers?: any, resumeFromSequence?: any, existingMessageId?: any, replayPrefix?: any}} options
 */
export function prepareHelixReconnectRequest({
  api,
  state,
  headers: extra,
  resumeFromSequence,
  existingMessageId,
  replayPrefix,
} = {}) {
  return ({ headers }) => {
    const target = state?.messageId
      ? { resumeFromSequence: state.cursor, existingMessageId: state.messageId, replayPrefix: true }
      : {
          resumeFromSequence: valueOf(resumeFromSequence),
          existingMessageId: valueOf(existingMessageId),
          replayPrefix: valueOf(replayPrefix),
        };
    return { api, headers: { ...valueOf(extra), ...resumeHeaders(target), ...headers } };
  };
}

/**
 * Fetch a snapshot with the retries of 002 (a 5xx, a 429 or a network failure: 4 tries,
 * 250 / 500 / 1000 ms apart). Resolves to the snapshot or null (404: no such chat yet).
 * @throws {SnapshotUnavailableError} after the retries, or at once for another 4xx
 */
export function fetchSnapshot(url, options = {}) {
  return fetchSnapshotWithRetry(url, options);
}

/** The typed body `{error, code, retryable, cause?}` of a chat error (`chat.error`), or undefined. */
export function parseHelixChatError(error) {
  return parseError(error);
}

/**
 * Whether `snapshot` holds the turn of the user message `messageId` (the server received
 * that send and stored it). A null snapshot (no such chat yet) holds no turn.
 * @param {{messages?: Array<{id: string, role: string}>} | null} snapshot
 * @param {string} messageId
 * @returns {boolean}
 */
export function holdsTurn(snapshot, messageId) {
  return Boolean(snapshot?.messages?.some((m) => m.id === messageId && m.role === "user"));
}

/**
 * The id of the last user message of `messages` (the turn a chat sent last), or null.
 * @param {Array<{id: string, role: string}>} messages
 * @returns {string | null}
 */
export function lastUserMessageId(messages) {
  for (let i = (messages?.length ?? 0) - 1; i >= 0; i -= 1) if (messages[i].role === "user") return messages[i].id;
  return null;
}

/**
 * Re-anchor a chat on the latest snapshot: seed it (without the in-flight message while
 * live) and resume with the replay prefix, which rebuilds that message whole, or seed the
 * ended conversation whole and clear the error. `chat` needs `setMessages`, `resumeStream`
 * and `clearError` (a useChat result). With `turn` (the id of the user message the chat sent
 * last), a snapshot that does not hold that turn (`holdsTurn`: the send never reached the
 * server) leaves the chat as it is, message and error, so it can be re-sent (002, "The
 * canonical client"). Resolves to the snapshot applied, or null when nothing was applied
 * (no such chat, or the turn is not held).
 * @throws {SnapshotUnavailableError} when the snapshot cannot be read
 */
export async function reanchorChat(chat, { snapshotUrl, fetch, signal, state, turn } = {}) {
  const snapshot = await fetchSnapshot(snapshotUrl, { fetch, signal });
  if (!snapshot || (turn && !holdsTurn(snapshot, turn))) return null;
  const target = snapshotResumeOptions(snapshot);
  if (state) state.messageId = null;
  chat.setMessages(target.messages);
  if (target.resume) await chat.resumeStream({ headers: resumeHeaders(target) });
  else chat.clearError?.();
  return snapshot;
}

/**
 * Stop = cancel the chat's current run on the server (`POST .../runs/<id>/cancel`, with
 * the CSRF header). Closing the connection alone never stops a run. Resolves to the
 * cancelled run's id, or null when the chat has no run.
 */
export async function stopRun({ baseUrl = "/helix/api", sessionId, fetch: baseFetch, headers } = {}) {
  const doFetch = baseFetch || globalThis.fetch.bind(globalThis);
  const routes = routesFor(baseUrl);
  const snapshot = await fetchSnapshot(routes.snapshot(sessionId), { fetch: doFetch, headers });
  if (!snapshot?.runId) return null;
  await doFetch(routes.cancel(sessionId, snapshot.runId), {
    method: "POST",
    headers: { "Content-Type": "application/json", ...csrfHeaders(), ...headers },
    credentials: "same-origin",
    body: "{}",
  });
  return snapshot.runId;
}

/**
 * A DefaultChatTransport wired to the chat route of `sessionId` under `baseUrl`: cursor
 * fetch, keyed sends with CSRF, resume headers from the recorded cursor or `target` (a
 * snapshotResumeOptions result). `DefaultChatTransport` is `ai`'s class (the "./react"
 * entry passes it). The result carries `helix`: `{sessionId, state, routes, snapshotUrl, stop(),
 * checkStatus(runId?), continueRun(runId?), keep(runId?), discard(runId?), regenerate(runId?),
 * recovery(runId?)}` (recovery.js's actions on this chat; `runId` defaults to its current run).
 */
export function helixTransport({ sessionId, baseUrl = "/helix/api", target = {}, headers, fetch, DefaultChatTransport }) {
  const routes = routesFor(baseUrl);
  const api = routes.chat(sessionId);
  const state = newStreamState();
  const transport = new DefaultChatTransport({
    api,
    credentials: "same-origin",
    fetch: createCursorFetch({ state, fetch }),
    prepareSendMessagesRequest: prepareHelixChatRequest({ api, headers }),
    prepareReconnectToStreamRequest: prepareHelixReconnectRequest({ api, state, headers, ...target }),
  });
  const actionOptions = (runId) => ({ baseUrl, sessionId, runId, fetch, headers: valueOf(headers) });
  transport.helix = {
    sessionId,
    state,
    routes,
    snapshotUrl: routes.snapshot(sessionId),
    stop: () => stopRun({ baseUrl, sessionId, fetch, headers: valueOf(headers) }),
    checkStatus: (runId) => checkRunStatus(actionOptions(runId)),
    continueRun: (runId) => continueRun(actionOptions(runId)),
    keep: (runId) => keepRun(actionOptions(runId)),
    discard: (runId) => discardRun(actionOptions(runId)),
    regenerate: (runId) => regenerateRun(actionOptions(runId)),
    recovery: (runId) => recoveryInventory(actionOptions(runId)),
    queue: (message) => queueMessage({ baseUrl, sessionId, message, fetch, headers: valueOf(headers) }),
    removeQueued: (queuedMessageId) =>
      removeQueuedMessage({ baseUrl, sessionId, queuedMessageId, fetch, headers: valueOf(headers) }),
  };
  return transport;
}
