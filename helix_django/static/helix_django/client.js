// helix_django browser client: a durable, resumable chat over the chat route.
//
// Plain ES module, no build step. It speaks the wire contract of 002 (docs/internals.md):
//   POST {base}/sessions/{id}/chat   send (AI SDK body, X-Helix-Request-Key)
//   GET  {base}/sessions/{id}/chat   resume (X-Resume-From-Sequence, X-Existing-Message-Id,
//                                     X-Helix-Replay-Prefix: 1)
//   GET  {base}/sessions/{id}/snapshot
// The answer is the AI SDK UI message stream over SSE with the stream sequence as `id:`.
//
// What it guarantees: every chunk is rendered once. It renders the snapshot, resumes from
// its cursor while the run is live (with the replay prefix, so the in-flight message is
// rebuilt whole), re-attaches from the last sequence after a drop with bounded backoff,
// re-anchors on the snapshot on a resync trigger, sends with a fresh request key and
// retries a send with the same key. Stop cancels the run (the stream ends with it).
//
//   const chat = new HelixChat({ sessionId, baseUrl: "/helix/api", headers: () => ({...}) });
//   chat.addEventListener("change", () => render(chat.view()));
//   await chat.load();
//   await chat.send("Hello");
//
// HelixChat holds the state and the view; its work is done by functions that take the chat
// first, one module per job (each imports only the ones listed above it):
//   client-stream.js    one request on the chat route and its stream, each chunk rendered once
//   client-snapshot.js  read and apply the snapshot, its recovery actions, re-anchor on it
//   client-follow.js    follow a connection to its end: re-attach with backoff, re-anchor, settle
//   client-sends.js     sends, retries and the pending (unaccepted) message; queued messages
//   client-actions.js   stop, regenerate, continue, keep, discard, check status

import * as actions from "./client-actions.js";
import { backoff, follow } from "./client-follow.js";
import * as sends from "./client-sends.js";
import * as snapshots from "./client-snapshot.js";
import * as stream from "./client-stream.js";
import { routesFor } from "./routes.js";

export { MessageAccumulator, textOf } from "./accumulator.js";
export {
  HelixRequestError,
  SnapshotUnavailableError,
  fetchSnapshotWithRetry,
  parseError,
} from "./errors.js";
export { gettext, interpolate, setCatalog } from "./i18n.js";
export { newMessageId, newRequestKey } from "./ids.js";
export { RESYNC_TRIGGERS, isResyncTrigger, resumeHeaders, snapshotResumeOptions, triggerIdentity } from "./resume.js";
export { readEventStream } from "./sse.js";
export { routesFor } from "./routes.js";

/**
 * One chat session in the browser. Emits "change" whenever its view changes.
 *
 * view() -> { messages, status, error, pending, snapshot, runId, runStatus, cursor }
 *   status: "loading" | "ready" | "submitted" | "streaming" | "reconnecting" | "error"
 *   error:  { kind: "snapshot" | "send" | "stream" | "action", code, error, retryable, cause?, status }
 *   pending: { message, key, error? } a user message the server has not accepted (yet)
 *   queued: [{ id, parts, queuedMessageId, createdAt }] messages waiting for the live answer
 *           to end (multitask enqueue), from the snapshot
 */
export class HelixChat extends EventTarget {
  constructor({
    sessionId,
    baseUrl = "/helix/api",
    routes,
    fetch: fetchImpl,
    headers,
    reattach = {},
    snapshotBackoffMs,
    stallMs = 45_000,
    isNew = false,
  } = {}) {
    super();
    this.sessionId = sessionId;
    // A chat id the page just minted: no session exists until its first send, so its first
    // load() renders the empty chat without asking for a snapshot (the route would answer 404).
    this.isNew = Boolean(isNew);
    this.routes = routes || routesFor(baseUrl);
    this.fetchImpl = fetchImpl || globalThis.fetch.bind(globalThis);
    this.extraHeaders = typeof headers === "function" ? headers : () => headers || {};
    this.reattach = { maxAttempts: 10, baseDelayMs: 400, maxDelayMs: 4000, ...reattach };
    this.snapshotBackoffMs = snapshotBackoffMs;
    // No byte (not even a ": keep-alive" heartbeat, sent every HEARTBEAT_SECONDS) for this
    // long means the connection is dead without having said so: treat it as a drop.
    this.stallMs = stallMs;
    this.committed = [];
    this.live = null;
    this.pending = null;
    this.snapshot = null;
    this.cursor = 0;
    this.cursorTrusted = false;
    this.status = "loading";
    this.error = null;
    this.runId = null;
    this.runStatus = null;
    this.loaded = false;
    this.recovery = null;
    this.statusCheck = null;
    this.queued = [];
    this.gen = 0;
    this.controller = null;
    this.seenTriggers = new Set();
    this.wake = null;
    this.onOnline = () => this.wake?.();
    globalThis.addEventListener?.("online", this.onOnline);
  }

  // --- view ---------------------------------------------------------------------------

  /** The messages to render: committed rows, the live message, then an unaccepted send. */
  get messages() {
    const list = [];
    const liveId = this.live?.message.id;
    for (const message of this.committed) list.push(message.id === liveId ? this.live.message : message);
    if (this.live && !list.includes(this.live.message)) list.push(this.live.message);
    if (this.pending && !list.some((m) => m.id === this.pending.message.id)) list.push(this.pending.message);
    return list;
  }

  view() {
    return {
      messages: this.messages,
      status: this.status,
      error: this.error,
      pending: this.pending,
      snapshot: this.snapshot,
      runId: this.runId,
      runStatus: this.runStatus,
      cursor: this.cursor,
      liveMessageId: this.live?.message.id ?? null,
      loaded: this.loaded,
      recovery: this.recovery,
      statusCheck: this.statusCheck,
      queued: this.queued,
      isBusy: ["submitted", "streaming", "reconnecting"].includes(this.status),
    };
  }

  emit() {
    this.dispatchEvent(new Event("change"));
  }

  setStatus(status, error = null) {
    this.status = status;
    this.error = error;
    this.emit();
  }

  dispose() {
    this.abortConnection();
    globalThis.removeEventListener?.("online", this.onOnline);
  }

  // --- snapshot (client-snapshot.js) --------------------------------------------------

  /**
   * Fetch the snapshot, render it and resume while it is live. Never renders an empty chat for a failed read.
   * A chat constructed with `isNew` starts empty without a request (once: later loads read the snapshot).
   */
  async load() {
    const gen = this.newGeneration();
    if (this.isNew) {
      this.isNew = false;
      snapshots.applySnapshot(this, null);
      this.setStatus("ready");
      return;
    }
    this.setStatus("loading");
    await follow(this, gen, () => snapshots.reanchorOpen(this, gen), { fromSnapshot: true });
  }

  readSnapshot() {
    return snapshots.readSnapshot(this);
  }

  /** Replace the rendered conversation by a snapshot; returns its resume options. */
  applySnapshot(snapshot) {
    return snapshots.applySnapshot(this, snapshot);
  }

  loadRecovery(snapshot) {
    return snapshots.loadRecovery(this, snapshot);
  }

  reanchorOpen(gen) {
    return snapshots.reanchorOpen(this, gen);
  }

  // --- connections (client-stream.js, client-follow.js) -------------------------------

  /** Start a new generation: what the previous one still reads or waits for is stale. */
  newGeneration() {
    this.abortConnection();
    this.gen += 1;
    this.wake?.();
    return this.gen;
  }

  abortConnection() {
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  headers(extra = {}) {
    return { Accept: "text/event-stream", ...this.extraHeaders(), ...extra };
  }

  open(gen, method, headers, body) {
    return stream.open(this, gen, method, headers, body);
  }

  acceptPending() {
    stream.acceptPending(this);
  }

  consume(gen, body, controller) {
    return stream.consume(this, gen, body, controller);
  }

  applyChunk(chunk) {
    return stream.applyChunk(this, chunk);
  }

  startMessage(messageId, metadata) {
    stream.startMessage(this, messageId, metadata);
  }

  follow(gen, openFirst, options) {
    return follow(this, gen, openFirst, options);
  }

  finishLive() {
    stream.finishLive(this);
  }

  backoff(ms) {
    return backoff(this, ms);
  }

  // --- sends (client-sends.js) --------------------------------------------------------

  /**
   * Send a user message with a fresh request key. `multitask`: what the send does if an
   * answer is being written (`"enqueue"`: it waits in `view().queued` and starts after the
   * answer; `"interrupt"`: the answer stops for it; default: the agent's setting).
   */
  send(text, options) {
    return sends.send(this, text, options);
  }

  /** Take a queued message back before it starts; the snapshot is read again after. */
  removeQueued(queuedMessageId) {
    return sends.removeQueued(this, queuedMessageId);
  }

  /** Retry what failed: a refused or lost send (same request key), the snapshot read, or the stream. */
  retry() {
    return sends.retry(this);
  }

  submitPending() {
    return sends.submitPending(this);
  }

  followSend(gen, openFirst) {
    return sends.followSend(this, gen, openFirst);
  }

  watchBusyRun(gen) {
    return sends.watchBusyRun(this, gen);
  }

  // --- actions (client-actions.js) ----------------------------------------------------

  /** Stop = cancel the run on the server; the stream ends with it and the page settles. */
  stop() {
    return actions.stop(this);
  }

  /** Regenerate an answer (`messageId`: the assistant message to replace; null: the latest turn's). */
  regenerate(messageId = null) {
    return actions.regenerate(this, messageId);
  }

  /** Continue an interrupted answer: a new generation from its partial state. */
  continueRun(runId) {
    return actions.continueRun(this, runId);
  }

  /** Keep a partial answer as it is, without more inference. */
  keep(runId) {
    return actions.keep(this, runId);
  }

  /** Discard a partial answer: remove the interrupted assistant turn. */
  discard(runId) {
    return actions.discard(this, runId);
  }

  /** Check status: ask the provider about the run's durable operation; resolves to the answer. */
  checkStatus(runId) {
    return actions.checkStatus(this, runId);
  }

  /** POST a JSON action, then re-anchor on the snapshot (and resume if a run went live). */
  action(url, payload, options) {
    return actions.action(this, url, payload, options);
  }
}
