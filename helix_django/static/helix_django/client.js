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

import { MessageAccumulator, textOf } from "./accumulator.js";
import {
  HelixRequestError,
  SnapshotUnavailableError,
  fetchSnapshotWithRetry,
  isNetworkError,
  networkError,
  parseError,
  responseError,
  sleep,
} from "./errors.js";
import { gettext } from "./i18n.js";
import { newMessageId, newRequestKey } from "./ids.js";
import { queuedMessagesOf, removeQueuedMessage } from "./queue.js";
import { isResyncTrigger, resumeHeaders, snapshotResumeOptions } from "./resume.js";
import { readEventStream } from "./sse.js";

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
import { routesFor } from "./routes.js";

/** Typed codes after which the client re-reads the snapshot instead of re-attaching. */
const REANCHOR_CODES = new Set(["state_not_resumable", "state_request_already_completed", "stream_failed"]);

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
// Check status outcomes after which the same run goes on (POST .../check_status).
const FOLLOWED_OUTCOMES = ["reattached", "recovering"];

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

  // --- snapshot -----------------------------------------------------------------------

  /**
   * Fetch the snapshot, render it and resume while it is live. Never renders an empty chat for a failed read.
   * A chat constructed with `isNew` starts empty without a request (once: later loads read the snapshot).
   */
  async load() {
    const gen = this.newGeneration();
    if (this.isNew) {
      this.isNew = false;
      this.applySnapshot(null);
      this.setStatus("ready");
      return;
    }
    this.setStatus("loading");
    await this.follow(gen, () => this.reanchorOpen(gen), { fromSnapshot: true });
  }

  async readSnapshot() {
    return fetchSnapshotWithRetry(this.routes.snapshot(this.sessionId), {
      fetch: this.fetchImpl,
      backoffMs: this.snapshotBackoffMs,
      headers: this.extraHeaders(),
    });
  }

  /** Replace the rendered conversation by a snapshot; returns its resume options. */
  applySnapshot(snapshot) {
    this.loaded = true;
    this.snapshot = snapshot;
    this.runId = snapshot?.runId ?? null;
    this.runStatus = snapshot?.runStatus ?? null;
    this.queued = queuedMessagesOf(snapshot);
    if (!snapshot) {
      this.committed = [];
      this.live = null;
      this.cursor = 0;
      this.cursorTrusted = true;
      return { resume: false, messages: [] };
    }
    const options = snapshotResumeOptions(snapshot);
    this.committed = options.messages;
    this.live = null;
    this.cursor = snapshot.streamSequence;
    this.cursorTrusted = true;
    if (this.pending && snapshot.messages.some((m) => m.id === this.pending.message.id)) this.pending = null;
    if (!options.resume) void this.loadRecovery(snapshot);
    return options;
  }

  /**
   * For a turn that ended interrupted, failed or cancelled, read which recovery actions
   * apply (and what was already done): `recovery = {runId, recoveryAction, actions}`.
   * Without that answer the page offers Regenerate only.
   */
  async loadRecovery(snapshot) {
    const { runId, runStatus } = snapshot;
    if (this.recovery?.runId !== runId) this.recovery = null;
    if (!runId || !["interrupted", "failed", "cancelled"].includes(runStatus) || !this.routes.recovery) return;
    try {
      const response = await this.fetchImpl(this.routes.recovery(this.sessionId, runId), {
        headers: { Accept: "application/json", ...this.extraHeaders() },
        credentials: "same-origin",
        cache: "no-store",
      });
      if (!response.ok || this.snapshot?.runId !== runId) return;
      this.recovery = await response.json();
      this.emit();
    } catch {
      // Keep the conservative default (Regenerate only).
    }
  }

  /** Read the snapshot, render it, and open the resume when it is live. */
  async reanchorOpen(gen) {
    let snapshot;
    try {
      snapshot = await this.readSnapshot();
    } catch (error) {
      if (error instanceof SnapshotUnavailableError && error.status === 0) throw networkError();
      throw error;
    }
    if (gen !== this.gen) return { stale: true };
    const options = this.applySnapshot(snapshot);
    this.emit();
    if (!options.resume) return { settled: true };
    return this.open(gen, "GET", resumeHeaders(options));
  }

  // --- connections --------------------------------------------------------------------

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

  /** Open one request on the chat route and read its stream to the end. */
  async open(gen, method, headers, body) {
    const controller = new AbortController();
    this.controller = controller;
    // A request that gets no answer at all within stallMs (a black-holed network) is a drop.
    let unanswered = false;
    const timer = setTimeout(() => {
      unanswered = true;
      controller.abort();
    }, this.stallMs);
    let response;
    try {
      response = await this.fetchImpl(this.routes.chat(this.sessionId), {
        method,
        headers: this.headers(body ? { ...headers, "Content-Type": "application/json" } : headers),
        body: body ? JSON.stringify(body) : undefined,
        credentials: "same-origin",
        cache: "no-store",
        signal: controller.signal,
      });
    } catch (error) {
      if (gen !== this.gen || (controller.signal.aborted && !unanswered)) return { stale: true };
      throw isNetworkError(error) || unanswered ? networkError() : error;
    } finally {
      clearTimeout(timer);
    }
    if (gen !== this.gen) {
      controller.abort();
      return { stale: true };
    }
    if (response.status === 204) return { settled: false, empty: true };
    if (!response.ok) throw await responseError(response);
    if (response.status === 202) {
      // Queued behind the live answer (multitask enqueue): the snapshot lists it until it starts.
      await response.body?.cancel();
      this.pending = null;
      return { queued: true };
    }
    const runId = response.headers.get("X-Helix-Run-Id");
    if (runId) this.runId = runId;
    if (this.pending && method === "POST") this.acceptPending();
    this.setStatus("streaming");
    return this.consume(gen, response.body, controller);
  }

  acceptPending() {
    const { message } = this.pending;
    if (!this.committed.some((m) => m.id === message.id)) this.committed = [...this.committed, message];
    this.pending = null;
  }

  /**
   * Read one response body. Returns { terminal, error?, reanchor?, received, stale? }:
   * `terminal` when the run's stream ended in-band (finish / error / abort / [DONE]);
   * a body that ends without one is a drop.
   */
  async consume(gen, body, controller) {
    const result = { terminal: false, received: 0 };
    let inReplay = false;
    let lastBytesAt = Date.now();
    let stalled = false;
    const watchdog = setInterval(() => {
      if (Date.now() - lastBytesAt > this.stallMs) {
        stalled = true;
        controller.abort();
      }
    }, Math.min(1000, this.stallMs));
    try {
      for await (const frame of readEventStream(body, { onBytes: () => (lastBytesAt = Date.now()) })) {
        if (gen !== this.gen) return { stale: true };
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
            if (sequence <= this.cursor && this.cursorTrusted) continue; // already rendered
            this.cursor = Math.max(this.cursor, sequence);
            this.cursorTrusted = true;
          }
        }
        result.received += 1;
        if (chunk.type === "data-helix-replay") {
          inReplay = chunk.data?.phase === "begin";
          if (inReplay) this.cursorTrusted = false;
          continue;
        }
        const outcome = this.applyChunk(chunk);
        if (outcome === "terminal") result.terminal = true;
        if (outcome === "error") {
          const typed = parseError(chunk.errorText);
          // The route's own "your read ended early" error is a drop: re-attach from the cursor.
          if (typed?.code === "transport_stream_drop") return result;
          result.terminal = true;
          result.error = typed || { code: "stream_error", error: gettext("The answer stopped with an error"), retryable: true };
        }
        if (outcome === "reanchor") return { ...result, reanchor: true };
        this.emit();
      }
    } catch (error) {
      if (gen !== this.gen || (controller.signal.aborted && !stalled)) return { stale: true };
      return result; // a body read that fails (or stalls) is a drop
    } finally {
      clearInterval(watchdog);
    }
    return result;
  }

  /** Apply one UI chunk; returns "terminal", "error", "reanchor" or undefined. */
  applyChunk(chunk) {
    const kind = chunk.type;
    if (kind === "start") {
      this.startMessage(chunk.messageId, chunk.messageMetadata);
      return undefined;
    }
    if (kind === "error") return "error";
    if (kind === "abort") return "terminal";
    if (!this.live) this.startMessage(this.snapshot?.resumeMessageId || null);
    this.live.apply(chunk);
    if (kind === "finish") return "terminal";
    if (isResyncTrigger(chunk, this.seenTriggers, this.snapshot)) return "reanchor";
    return undefined;
  }

  startMessage(messageId, metadata) {
    if (this.live && (!messageId || this.live.message.id === messageId)) {
      this.live.mergeMetadata(metadata);
      return;
    }
    if (this.live) this.committed = this.messages.filter((m) => m !== this.pending?.message);
    const id = messageId || `msg_live_${this.gen}`;
    const seed = this.committed.find((m) => m.id === id && m.role === "assistant");
    this.live = new MessageAccumulator(id, seed || {});
    this.live.mergeMetadata(metadata);
  }

  /**
   * Drive a connection to its end: re-attach after drops (bounded backoff), re-anchor on
   * triggers and typed refusals, and settle on the snapshot once the run's stream ended.
   */
  async follow(gen, openFirst, { fromSnapshot = false } = {}) {
    let open = openFirst;
    let attempt = 0;
    let settles = 0;
    let waits = 0;
    for (;;) {
      let result;
      try {
        result = await open();
      } catch (error) {
        if (gen !== this.gen) return;
        const typed = parseError(error) || { code: "transport_error", error: String(error), retryable: true };
        const status = error instanceof HelixRequestError ? error.status : 0;
        if (fromSnapshot && error instanceof SnapshotUnavailableError && status !== 0) {
          this.setStatus("error", { kind: "snapshot", ...typed, retryable: true, status });
          return;
        }
        // A stream that failed (409 {error: "stream_failed", code: <the run's failure>}) or a
        // resume the server cannot serve: the snapshot says what happened.
        const reanchor = REANCHOR_CODES.has(typed.code) || typed.error === "stream_failed" || status === 409;
        if (reanchor && settles < 3) {
          settles += 1;
          open = () => this.reanchorOpen(gen);
          continue;
        }
        if (isNetworkError(error) || (typed.retryable && status >= 500)) {
          result = { dropped: true, received: 0 };
        } else {
          this.setStatus("error", { kind: fromSnapshot || !this.loaded ? "snapshot" : "stream", ...typed, status });
          return;
        }
      }
      if (result.stale || result.refused || gen !== this.gen) return;
      fromSnapshot = false;
      if (result.queued) {
        open = () => this.reanchorOpen(gen); // the live answer goes on: follow it again
        continue;
      }
      if (result.reanchor) {
        this.abortConnection();
        open = () => this.reanchorOpen(gen);
        continue;
      }
      if (result.settled && this.queued.length && waits < 15) {
        // The answer ended and a queued message starts right after it: show its turn live.
        waits += 1;
        await sleep(200);
        if (gen !== this.gen) return;
        open = () => this.reanchorOpen(gen);
        continue;
      }
      if (result.settled) {
        this.finishLive();
        this.setStatus("ready");
        return;
      }
      if (result.terminal || result.empty) {
        // The run's stream ended: the snapshot is the truth (status, partial flags, runId).
        settles += 1;
        if (settles > 4) {
          this.finishLive();
          this.setStatus("ready");
          return;
        }
        if (settles > 1) await sleep(150 * settles);
        open = () => this.reanchorOpen(gen);
        continue;
      }
      // A drop: the body ended without a terminal frame, or the request failed.
      attempt = result.received > 0 ? 1 : attempt + 1;
      if (attempt > this.reattach.maxAttempts) {
        this.setStatus("error", {
          // Without any snapshot read the page has nothing to show: an error state, not an empty chat.
          kind: this.loaded ? "stream" : "snapshot",
          code: "transport_stream_drop",
          error: gettext("The connection to the server was lost"),
          retryable: true,
          status: 0,
        });
        return;
      }
      this.setStatus("reconnecting");
      const delay = Math.min(this.reattach.maxDelayMs, this.reattach.baseDelayMs * 2 ** (attempt - 1));
      await this.backoff(delay);
      if (gen !== this.gen) return;
      open =
        this.live && this.cursorTrusted
          ? () =>
              this.open(gen, "GET", resumeHeaders({ resumeFromSequence: this.cursor, existingMessageId: this.live.message.id }))
          : () => this.reanchorOpen(gen);
    }
  }

  finishLive() {
    if (!this.live) return;
    const message = this.live.snapshot({ close: true });
    this.committed = this.committed.some((m) => m.id === message.id)
      ? this.committed.map((m) => (m.id === message.id ? message : m))
      : [...this.committed, message];
    this.live = null;
  }

  backoff(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = null;
        done();
      };
    });
  }

  // --- sends and actions --------------------------------------------------------------

  /**
   * Send a user message with a fresh request key. `multitask`: what the send does if an
   * answer is being written (`"enqueue"`: it waits in `view().queued` and starts after the
   * answer; `"interrupt"`: the answer stops for it; default: the agent's setting).
   */
  async send(text, { multitask } = {}) {
    const message = { id: newMessageId(), role: "user", parts: [{ type: "text", text }], metadata: {} };
    const previous = this.pending?.message;
    const history = this.messages.filter((m) => m !== previous);
    this.pending = { message, key: newRequestKey(), history, multitask };
    return this.submitPending();
  }

  /** Take a queued message back before it starts; the snapshot is read again after. */
  async removeQueued(queuedMessageId) {
    try {
      await removeQueuedMessage({
        sessionId: this.sessionId,
        queuedMessageId,
        routes: this.routes,
        fetch: this.fetchImpl,
        headers: this.extraHeaders(),
      });
    } catch (error) {
      this.setStatus(this.status, { kind: "action", ...parseError(error), status: error.status ?? 0 });
      return false;
    }
    this.queued = this.queued.filter((m) => m.queuedMessageId !== queuedMessageId);
    this.emit();
    return true;
  }

  /** Retry what failed: a refused or lost send (same request key), the snapshot read, or the stream. */
  async retry() {
    if (this.pending) return this.submitPending();
    if (this.error?.kind === "snapshot" || this.error?.kind === "stream" || this.error?.kind === "action") {
      return this.load();
    }
    return undefined;
  }

  async submitPending() {
    const gen = this.newGeneration();
    const { message, key, history, multitask } = this.pending;
    this.pending.error = null;
    this.setStatus("submitted");
    const body = {
      id: this.sessionId,
      messages: [...history.filter((m) => m.id !== message.id), message],
      trigger: "submit-message",
    };
    const headers = { "X-Helix-Request-Key": key, ...(multitask && { "X-Helix-Multitask": multitask }) };
    await this.followSend(gen, () => this.open(gen, "POST", headers, body));
  }

  async followSend(gen, openFirst) {
    let refused = null;
    await this.follow(gen, async () => {
      try {
        return await openFirst();
      } catch (error) {
        if (!this.pending || !(error instanceof HelixRequestError) || error.status === 0) throw error;
        refused = error;
        return { refused: true };
      }
    });
    if (gen !== this.gen) return;
    if (refused) {
      // The server answered the send with a refusal: nothing was written. Keep the message
      // as unsent with its typed error; a busy session is shown live meanwhile.
      const typed = { ...parseError(refused), status: refused.status };
      this.pending.error = typed;
      this.setStatus("error", { kind: "send", ...typed });
      if (typed.code === "state_already_running") void this.watchBusyRun(gen);
      else if (typed.code === "state_request_already_completed") {
        this.pending = null;
        void this.load();
      }
    } else if (this.pending) {
      // The send never reached the server (or its run never committed): keep it, unsent,
      // with a Retry that re-sends it under the same request key.
      const typed =
        this.status === "error" && this.error
          ? this.error
          : { code: "network_error", error: gettext("The message was not sent"), retryable: true, status: 0 };
      this.pending.error = typed;
      this.setStatus("error", { ...typed, kind: "send" });
    }
  }

  /** While a refused send waits, show the run that holds the session, live. */
  async watchBusyRun(gen) {
    const error = this.error;
    try {
      const snapshot = await this.readSnapshot();
      if (gen !== this.gen || !snapshot) return;
      const options = this.applySnapshot(snapshot);
      this.error = error;
      this.emit();
      if (!options.resume) return;
      const next = this.newGeneration();
      this.status = "streaming";
      await this.follow(next, () => this.open(next, "GET", resumeHeaders(options)));
      if (next === this.gen && this.pending) this.setStatus("error", error);
    } catch {
      // The refusal stays on screen with its Retry; nothing else to do.
    }
  }

  /** Stop = cancel the run on the server; the stream ends with it and the page settles. */
  async stop() {
    let runId = this.runId;
    if (!runId || !this.view().isBusy) {
      try {
        runId = (await this.readSnapshot())?.runId;
      } catch {
        runId = this.runId;
      }
    }
    if (!runId) return;
    await this.action(this.routes.cancel(this.sessionId, runId), {}, { follow: false });
  }

  /**
   * Regenerate an answer: a new run from the last safe context (a deliberate new request key).
   * `messageId` is the assistant message to replace; null regenerates the latest turn when it
   * has no answer (stopped before any text, or its partial answer was discarded).
   */
  async regenerate(messageId = null) {
    const index = messageId == null ? this.committed.length : this.committed.findIndex((m) => m.id === messageId);
    if (index < 0) return;
    const history = this.committed.slice(0, index);
    const gen = this.newGeneration();
    this.pending = null;
    this.committed = history;
    this.live = null;
    this.setStatus("submitted");
    const body = { id: this.sessionId, messages: history, trigger: "regenerate-message" };
    if (messageId != null) body.messageId = messageId;
    await this.follow(gen, () => this.open(gen, "POST", { "X-Helix-Request-Key": newRequestKey() }, body));
  }

  /** Continue an interrupted answer: a new generation from its partial state (000, "Continue"). */
  async continueRun(runId) {
    await this.action(this.routes.continueRun(this.sessionId, runId), {});
  }

  /** Keep a partial answer as it is, without more inference. */
  async keep(runId) {
    await this.action(this.routes.keep(this.sessionId, runId), {});
  }

  /** Discard a partial answer: remove the interrupted assistant turn. */
  async discard(runId) {
    await this.action(this.routes.discard(this.sessionId, runId), {});
  }

  /**
   * Check status: ask the provider about the run's durable operation (no inference; the
   * admin's Check status). The page then re-reads the snapshot: a run the provider finished
   * shows its complete answer. Resolves to the server's answer `{action, runId, outcome,
   * newRunId}` (`outcome`: `completed`, or why the run stays interrupted, e.g.
   * `provider_in_progress`), also kept as the view's `statusCheck`; null when refused
   * (`error` says why).
   */
  async checkStatus(runId) {
    const found = (answer) => {
      this.statusCheck = answer ? { runId, outcome: answer.outcome } : null;
    };
    // A run that goes on (re-attached, or followed by the server) is kept before the page
    // re-reads the snapshot and follows it live, so the page can say why while it follows.
    // Any other outcome is kept once the snapshot and its actions are read.
    const goesOn = (answer) => FOLLOWED_OUTCOMES.includes(answer?.outcome) && found(answer);
    const answer = await this.action(this.routes.checkStatus(this.sessionId, runId), {}, { onAnswer: goesOn });
    found(answer);
    this.emit();
    return answer;
  }

  /**
   * POST a JSON action, then re-anchor on the snapshot (and resume if a run went live).
   * Resolves to the action's JSON answer (null when refused, unreachable or streamed).
   * `onAnswer(answer)` runs with a JSON answer before the re-anchor.
   */
  async action(url, payload, { follow = true, onAnswer = null } = {}) {
    this.statusCheck = null; // what a Check status found is past once anything else is done
    if (follow) this.setStatus("submitted");
    let response;
    try {
      response = await this.fetchImpl(url, {
        method: "POST",
        headers: { ...this.extraHeaders(), "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(payload),
        credentials: "same-origin",
      });
    } catch {
      this.setStatus("error", { kind: "action", ...networkError().body, status: 0 });
      return null;
    }
    if (!response.ok) {
      const error = await responseError(response);
      this.setStatus("error", { kind: "action", ...parseError(error), status: response.status });
      return null;
    }
    if (!follow) return null;
    if ((response.headers.get("Content-Type") || "").includes("text/event-stream")) {
      const gen = this.newGeneration();
      const controller = new AbortController();
      this.controller = controller;
      this.setStatus("streaming");
      await this.follow(gen, async () => this.consume(gen, response.body, controller));
      return null;
    }
    const answer = await response.json().catch(() => null);
    onAnswer?.(answer);
    await this.load();
    return answer;
  }
}
