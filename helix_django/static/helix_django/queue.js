// Messages sent while an answer is being written (multitask), for the AI SDK kit and pages.
// Plain ES module: aisdk.js re-exports it, useHelixChat (react.js) binds it to its chat.
//
//   await queueMessage({ sessionId, message });    // {queued: {queuedMessageId, position, ...}}
//                                                  // or {started: true} when no answer was live
//   await removeQueuedMessage({ sessionId, queuedMessageId });
//   queuedMessagesOf(snapshot);                    // the snapshot's waiting messages, oldest first

import { csrfHeaders } from "./csrf.js";
import { networkError, responseError } from "./errors.js";
import { newRequestKey } from "./ids.js";
import { routesFor } from "./routes.js";

/** The strategies a send may ask for while an answer is live (the `X-Helix-Multitask` values). */
export const MULTITASK_STRATEGIES = Object.freeze(["reject", "interrupt", "enqueue"]);

async function call(doFetch, url, init) {
  try {
    return await doFetch(url, { credentials: "same-origin", ...init });
  } catch {
    throw networkError();
  }
}

/**
 * Send `message` (a UIMessage `{id, role: "user", parts}`) to be answered after the live
 * answer (multitask `enqueue`). The server stores it and answers 202 at once; it starts
 * when the live run ends, and the snapshot lists it until then. `requestKey` (default: a
 * fresh one) makes a retry of this call return the same queued message.
 * Resolves to `{queued: {queuedMessageId, messageId, position, runId, duplicate}}`, or to
 * `{started: true}` when no answer was live any more and the message started at once (its
 * answer streams on the session: re-anchor on the snapshot to show it).
 * @throws {HelixRequestError} when refused (e.g. 409 `state_request_key_conflict`) or
 *   unreachable (status 0)
 */
export async function queueMessage({ baseUrl = "/helix/api", sessionId, message, requestKey, fetch: baseFetch, headers } = {}) {
  const doFetch = baseFetch || globalThis.fetch.bind(globalThis);
  const response = await call(doFetch, routesFor(baseUrl).chat(sessionId), {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      "X-Helix-Multitask": "enqueue",
      "X-Helix-Request-Key": requestKey || newRequestKey(),
      ...csrfHeaders(),
      ...headers,
    },
    body: JSON.stringify({ id: sessionId, messages: [message], trigger: "submit-message" }),
  });
  if (!response.ok) throw await responseError(response);
  if (response.status === 202) return response.json();
  await response.body?.cancel(); // the run goes on without this reader
  return { started: true };
}

/**
 * Take a queued message back before it starts (`DELETE sessions/<id>/queued/<queuedMessageId>`).
 * `routes`: the URLs of a client built on routesFor (default: routesFor(baseUrl)). Resolves
 * to true once removed.
 * @throws {HelixRequestError} 409 `state_queued_message_not_queued` when it started already
 *   (`body.runId`), 404 `state_queued_message_not_found`, or status 0 when unreachable
 */
export async function removeQueuedMessage({
  baseUrl = "/helix/api",
  routes,
  sessionId,
  queuedMessageId,
  fetch: baseFetch,
  headers,
} = {}) {
  const doFetch = baseFetch || globalThis.fetch.bind(globalThis);
  const route = (routes || routesFor(baseUrl)).queued || routesFor(baseUrl).queued;
  const response = await call(doFetch, route(sessionId, queuedMessageId), {
    method: "DELETE",
    headers: { Accept: "application/json", ...csrfHeaders(), ...headers },
  });
  if (!response.ok) throw await responseError(response);
  return true;
}

/** The messages a snapshot lists as waiting to start, oldest first (`[]` when none). */
export function queuedMessagesOf(snapshot) {
  return Array.isArray(snapshot?.queuedMessages) ? snapshot.queuedMessages : [];
}
