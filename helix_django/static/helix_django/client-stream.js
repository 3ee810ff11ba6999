// One request on the chat route of HelixChat (client.js) and its stream: open it, read its
// UI message stream frame by frame, and render each chunk once into the chat's live message.
//
// Every function takes the chat first and reads or updates its state (`cursor`,
// `cursorTrusted`, `live`, `committed`, `pending`, `controller`, `gen`). A chunk whose
// stream sequence (`id:`) is at or below the trusted cursor is already rendered and skipped;
// a replay prefix (`data-helix-replay` begin ... end) rebuilds the live message whole and
// leaves the cursor untrusted until the next sequenced chunk.

import { MessageAccumulator } from "./accumulator.js";
import { isNetworkError, networkError, parseError, responseError } from "./errors.js";
import { gettext } from "./i18n.js";
import { isResyncTrigger } from "./resume.js";
import { readEventStream } from "./sse.js";

/**
 * Open one request on the chat route and read its stream to the end. Returns what
 * consume() returns, or `{stale}` (a newer generation took over), `{settled: false, empty}`
 * (204: nothing to resume) or `{queued}` (202: the send waits behind the live answer).
 */
export async function open(chat, gen, method, headers, body) {
  const controller = new AbortController();
  chat.controller = controller;
  // A request that gets no answer at all within stallMs (a black-holed network) is a drop.
  let unanswered = false;
  const timer = setTimeout(() => {
    unanswered = true;
    controller.abort();
  }, chat.stallMs);
  let response;
  try {
    response = await chat.fetchImpl(chat.routes.chat(chat.sessionId), {
      method,
      headers: chat.headers(body ? { ...headers, "Content-Type": "application/json" } : headers),
      body: body ? JSON.stringify(body) : undefined,
      credentials: "same-origin",
      cache: "no-store",
      signal: controller.signal,
    });
  } catch (error) {
    if (gen !== chat.gen || (controller.signal.aborted && !unanswered)) return { stale: true };
    throw isNetworkError(error) || unanswered ? networkError() : error;
  } finally {
    clearTimeout(timer);
  }
  if (gen !== chat.gen) {
    controller.abort();
    return { stale: true };
  }
  if (response.status === 204) return { settled: false, empty: true };
  if (!response.ok) throw await responseError(response);
  if (response.status === 202) {
    // Queued behind the live answer (multitask enqueue): the snapshot lists it until it starts.
    await response.body?.cancel();
    chat.pending = null;
    return { queued: true };
  }
  const runId = response.headers.get("X-Helix-Run-Id");
  if (runId) chat.runId = runId;
  if (chat.pending && method === "POST") acceptPending(chat);
  chat.setStatus("streaming");
  return consume(chat, gen, response.body, controller);
}

/** Move the pending user message into the committed conversation: the server accepted it. */
export function acceptPending(chat) {
  const { message } = chat.pending;
  if (!chat.committed.some((m) => m.id === message.id)) chat.committed = [...chat.committed, message];
  chat.pending = null;
}

/**
 * Read one response body. Returns { terminal, error?, reanchor?, received, stale? }:
 * `terminal` when the run's stream ended in-band (finish / error / abort / [DONE]);
 * a body that ends without one is a drop.
 */
export async function consume(chat, gen, body, controller) {
  const result = { terminal: false, received: 0 };
  let inReplay = false;
  let lastBytesAt = Date.now();
  let stalled = false;
  const watchdog = setInterval(() => {
    if (Date.now() - lastBytesAt > chat.stallMs) {
      stalled = true;
      controller.abort();
    }
  }, Math.min(1000, chat.stallMs));
  try {
    for await (const frame of readEventStream(body, { onBytes: () => (lastBytesAt = Date.now()) })) {
      if (gen !== chat.gen) return { stale: true };
      if (frame.data === "[DONE]") {
        result.terminal = true;
        continue;
      }
      let chunk;
      try {
        chunk = JSON.parse(frame.data);
      } catch {
        return { ...result, reanchor: true };
      }
      if (frame.event === "error" && !chunk.type) {
        result.terminal = true;
        result.error = parseError(chunk);
        continue;
      }
      if (!inReplay && frame.id != null && frame.id !== "") {
        const sequence = Number(frame.id);
        if (Number.isFinite(sequence)) {
          if (sequence <= chat.cursor && chat.cursorTrusted) continue; // already rendered
          chat.cursor = Math.max(chat.cursor, sequence);
          chat.cursorTrusted = true;
        }
      }
      result.received += 1;
      if (chunk.type === "data-helix-replay") {
        inReplay = chunk.data?.phase === "begin";
        if (inReplay) chat.cursorTrusted = false;
        continue;
      }
      const outcome = applyChunk(chat, chunk);
      if (outcome === "terminal") result.terminal = true;
      if (outcome === "error") {
        const typed = parseError(chunk.errorText);
        // The route's own "your read ended early" error is a drop: re-attach from the cursor.
        if (typed?.code === "transport_stream_drop") return result;
        result.terminal = true;
        result.error = typed || { code: "stream_error", error: gettext("The answer stopped with an error"), retryable: true };
      }
      if (outcome === "reanchor") return { ...result, reanchor: true };
      chat.emit();
    }
  } catch (error) {
    if (gen !== chat.gen || (controller.signal.aborted && !stalled)) return { stale: true };
    return result; // a body read that fails (or stalls) is a drop
  } finally {
    clearInterval(watchdog);
  }
  return result;
}

/** Apply one UI chunk; returns "terminal", "error", "reanchor" or undefined. */
export function applyChunk(chat, chunk) {
  const kind = chunk.type;
  if (kind === "start") {
    startMessage(chat, chunk.messageId, chunk.messageMetadata);
    return undefined;
  }
  if (kind === "error") return "error";
  if (kind === "abort") return "terminal";
  if (!chat.live) startMessage(chat, chat.snapshot?.resumeMessageId || null);
  chat.live.apply(chunk);
  if (kind === "finish") return "terminal";
  if (isResyncTrigger(chunk, chat.seenTriggers, chat.snapshot)) return "reanchor";
  return undefined;
}

/**
 * Start (or go on with) the live message `messageId`: the same id merges its metadata; another
 * one commits the current live message first. A committed assistant message of that id seeds it.
 */
export function startMessage(chat, messageId, metadata) {
  if (chat.live && (!messageId || chat.live.message.id === messageId)) {
    chat.live.mergeMetadata(metadata);
    return;
  }
  if (chat.live) chat.committed = chat.messages.filter((m) => m !== chat.pending?.message);
  const id = messageId || `msg_live_${chat.gen}`;
  const seed = chat.committed.find((m) => m.id === id && m.role === "assistant");
  chat.live = new MessageAccumulator(id, seed || {});
  chat.live.mergeMetadata(metadata);
}

/** Close the live message and keep it in the committed conversation (in place of its row). */
export function finishLive(chat) {
  if (!chat.live) return;
  const message = chat.live.snapshot({ close: true });
  chat.committed = chat.committed.some((m) => m.id === message.id)
    ? chat.committed.map((m) => (m.id === message.id ? message : m))
    : [...chat.committed, message];
  chat.live = null;
}
