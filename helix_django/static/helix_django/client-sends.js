// The sends of HelixChat (client.js): a user message is pending (rendered, not yet accepted)
// until the server accepts it; a refused or lost send stays pending with its typed error and
// a retry re-sends it under the same request key. Also: taking a queued message back, and
// showing the run that holds a busy session while a refused send waits.
//
// Every function takes the chat first and reads or updates its state.

import { HelixRequestError, parseError } from "./errors.js";
import { gettext } from "./i18n.js";
import { newMessageId, newRequestKey } from "./ids.js";
import { removeQueuedMessage } from "./queue.js";
import { resumeHeaders } from "./resume.js";
import { follow } from "./client-follow.js";
import { applySnapshot, readSnapshot } from "./client-snapshot.js";
import { open } from "./client-stream.js";

/**
 * Send a user message with a fresh request key. `multitask`: what the send does if an
 * answer is being written (`"enqueue"`: it waits in `view().queued` and starts after the
 * answer; `"interrupt"`: the answer stops for it; default: the agent's setting).
 */
export async function send(chat, text, { multitask } = {}) {
  const message = { id: newMessageId(), role: "user", parts: [{ type: "text", text }], metadata: {} };
  const previous = chat.pending?.message;
  const history = chat.messages.filter((m) => m !== previous);
  chat.pending = { message, key: newRequestKey(), history, multitask };
  return submitPending(chat);
}

/** Take a queued message back before it starts; the snapshot is read again after. */
export async function removeQueued(chat, queuedMessageId) {
  try {
    await removeQueuedMessage({
      sessionId: chat.sessionId,
      queuedMessageId,
      routes: chat.routes,
      fetch: chat.fetchImpl,
      headers: chat.extraHeaders(),
    });
  } catch (error) {
    chat.setStatus(chat.status, { kind: "action", ...parseError(error), status: error.status ?? 0 });
    return false;
  }
  chat.queued = chat.queued.filter((m) => m.queuedMessageId !== queuedMessageId);
  chat.emit();
  return true;
}

/** Retry what failed: a refused or lost send (same request key), the snapshot read, or the stream. */
export async function retry(chat) {
  if (chat.pending) return submitPending(chat);
  if (chat.error?.kind === "snapshot" || chat.error?.kind === "stream" || chat.error?.kind === "action") {
    return chat.load();
  }
  return undefined;
}

/** POST the pending message (under its request key) and follow the answer. */
export async function submitPending(chat) {
  const gen = chat.newGeneration();
  const { message, key, history, multitask } = chat.pending;
  chat.pending.error = null;
  chat.setStatus("submitted");
  const body = {
    id: chat.sessionId,
    messages: [...history.filter((m) => m.id !== message.id), message],
    trigger: "submit-message",
  };
  const headers = { "X-Helix-Request-Key": key, ...(multitask && { "X-Helix-Multitask": multitask }) };
  await followSend(chat, gen, () => open(chat, gen, "POST", headers, body));
}

/** Follow a send; a refused or lost send stays pending with its typed error. */
export async function followSend(chat, gen, openFirst) {
  let refused = null;
  await follow(chat, gen, async () => {
    try {
      return await openFirst();
    } catch (error) {
      if (!chat.pending || !(error instanceof HelixRequestError) || error.status === 0) throw error;
      refused = error;
      return { refused: true };
    }
  });
  if (gen !== chat.gen) return;
  if (refused) {
    // The server answered the send with a refusal: nothing was written. Keep the message
    // as unsent with its typed error; a busy session is shown live meanwhile.
    const typed = { ...parseError(refused), status: refused.status };
    chat.pending.error = typed;
    chat.setStatus("error", { kind: "send", ...typed });
    if (typed.code === "state_already_running") void watchBusyRun(chat, gen);
    else if (typed.code === "state_request_already_completed") {
      chat.pending = null;
      void chat.load();
    }
  } else if (chat.pending) {
    // The send never reached the server (or its run never committed): keep it, unsent,
    // with a Retry that re-sends it under the same request key.
    const typed =
      chat.status === "error" && chat.error
        ? chat.error
        : { code: "network_error", error: gettext("The message was not sent"), retryable: true, status: 0 };
    chat.pending.error = typed;
    chat.setStatus("error", { ...typed, kind: "send" });
  }
}

/** While a refused send waits, show the run that holds the session, live. */
export async function watchBusyRun(chat, gen) {
  const error = chat.error;
  try {
    const snapshot = await readSnapshot(chat);
    if (gen !== chat.gen || !snapshot) return;
    const options = applySnapshot(chat, snapshot);
    chat.error = error;
    chat.emit();
    if (!options.resume) return;
    const next = chat.newGeneration();
    chat.status = "streaming";
    await follow(chat, next, () => open(chat, next, "GET", resumeHeaders(options)));
    if (next === chat.gen && chat.pending) chat.setStatus("error", error);
  } catch {
    // The refusal stays on screen with its Retry; nothing else to do.
  }
}
