// Unit tests of the AI SDK kit's core (helix_django/static/helix_django/aisdk.js) under
// Node's test runner: `node --test tests/browser/kit/`. Run by tests/browser/test_aisdk_kit_unit.py.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  HelixRequestError,
  RECOVERY_ACTIONS,
  checkRunStatus,
  continueRun,
  createCursorFetch,
  discardRun,
  helixTransport,
  holdsTurn,
  keepRun,
  lastUserMessageId,
  recoveryInventory,
  regenerateRun,
  isReattachable,
  isResyncTrigger,
  newStreamState,
  prepareHelixChatRequest,
  prepareHelixReconnectRequest,
  reattachDelay,
  resumeHeaders,
  snapshotResumeOptions,
  waitForReattach,
} from "../../../helix_django/static/helix_django/aisdk.js";

const sse = (frames) => frames.map(([id, chunk]) => `${id === null ? "" : `id: ${id}\n`}data: ${typeof chunk === "string" ? chunk : JSON.stringify(chunk)}\n\n`).join("");

function streamingResponse(parts, { error } = {}) {
  const encoder = new TextEncoder();
  const body = new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(encoder.encode(part));
      if (error) controller.error(error);
      else controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
}

async function drain(response) {
  const reader = response.body.getReader();
  let text = "";
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return text;
    text += decoder.decode(value, { stream: true });
  }
}

test("the cursor fetch records each frame's id and the live message, bytes unchanged", async () => {
  const state = newStreamState();
  const wire = sse([[4, { type: "start", messageId: "m1" }], [5, { type: "text-delta", id: "t", delta: "Hi" }]]);
  const half = Math.floor(wire.length / 2);
  const fetch = createCursorFetch({ state, fetch: async () => streamingResponse([wire.slice(0, half), wire.slice(half)]) });
  const response = await fetch("/chat");
  const reader = response.body.getReader();
  let text = "";
  await assert.rejects(async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
  }, (error) => error instanceof TypeError && /network error/.test(error.message));
  assert.equal(text, wire);
  assert.deepEqual(state, { cursor: 5, messageId: "m1", failure: { kind: "network" } });
});

test("a response that ends with its terminal frame ends cleanly and closes the live message", async () => {
  const state = newStreamState();
  const wire = sse([[7, { type: "start", messageId: "m2" }], [8, { type: "finish" }], [null, "[DONE]"]]);
  const fetch = createCursorFetch({ state, fetch: async () => streamingResponse([wire]) });
  assert.equal(await drain(await fetch("/chat")), wire);
  assert.deepEqual(state, { cursor: 8, messageId: null, failure: null });
});

test("a refusal is recorded with its status and Retry-After; a 4xx is not re-attachable", async () => {
  const state = newStreamState();
  const refused = (status, headers = {}) =>
    createCursorFetch({ state, fetch: async () => new Response('{"code":"x"}', { status, headers }) })("/chat");
  await refused(503, { "retry-after": "2" });
  assert.deepEqual(state.failure, { kind: "refused", status: 503, retryAfterSeconds: 2 });
  assert.equal(isReattachable(state), true);
  await refused(409);
  assert.deepEqual(state.failure, { kind: "refused", status: 409 });
  assert.equal(isReattachable(state), false);
  const offline = createCursorFetch({ state, fetch: async () => Promise.reject(new TypeError("Failed to fetch")) });
  await assert.rejects(offline("/chat"), TypeError);
  assert.equal(isReattachable(state), true);
});

test("a send carries one request key per user message, reused by its retry, and the CSRF cookie", async () => {
  globalThis.document = { cookie: "other=1; csrftoken=tok%2Ben" };
  try {
    const prepare = prepareHelixChatRequest({ api: "/helix/api/sessions/s1/chat", headers: () => ({ A: "1" }) });
    const user = { id: "u1", role: "user", parts: [] };
    const args = { id: "s1", messages: [user], trigger: "submit-message", messageId: undefined, headers: {}, body: { x: 1 } };
    const first = prepare(args);
    const retry = prepare({ ...args, trigger: "regenerate-message" });
    const other = prepare({ ...args, messages: [user, { id: "a1", role: "assistant", parts: [] }] });
    assert.equal(first.api, "/helix/api/sessions/s1/chat");
    assert.deepEqual(first.body, { x: 1, id: "s1", messages: [user], trigger: "submit-message", messageId: undefined });
    assert.equal(first.headers["X-CSRFToken"], "tok+en");
    assert.equal(first.headers.A, "1");
    assert.match(first.headers["X-Helix-Request-Key"], /^rk_[0-9a-f]{32}$/);
    assert.equal(retry.headers["X-Helix-Request-Key"], first.headers["X-Helix-Request-Key"]);
    assert.notEqual(other.headers["X-Helix-Request-Key"], first.headers["X-Helix-Request-Key"]);
  } finally {
    delete globalThis.document;
  }
});

test("a resume asks for the recorded message with the replay prefix, else the target; per-request wins", () => {
  const state = newStreamState();
  const prepare = prepareHelixReconnectRequest({
    api: "/c",
    state,
    headers: { Authorization: "Token t" },
    resumeFromSequence: () => 3,
    existingMessageId: "m0",
    replayPrefix: true,
  });
  assert.deepEqual(prepare({ headers: {} }).headers, {
    Authorization: "Token t",
    "X-Resume-From-Sequence": "3",
    "X-Existing-Message-Id": "m0",
    "X-Helix-Replay-Prefix": "1",
  });
  Object.assign(state, { cursor: 9, messageId: "m1" });
  assert.deepEqual(prepare({ headers: {} }).headers, {
    Authorization: "Token t",
    "X-Resume-From-Sequence": "9",
    "X-Existing-Message-Id": "m1",
    "X-Helix-Replay-Prefix": "1",
  });
  const own = prepare({ headers: { "X-Resume-From-Sequence": "12" } });
  assert.equal(own.api, "/c");
  assert.equal(own.headers["X-Resume-From-Sequence"], "12");
});

test("snapshotResumeOptions and resumeHeaders follow the reference's table", () => {
  const messages = [{ id: "u" }, { id: "a" }];
  const live = { status: "active", messages, streamSequence: 5, resumeMessageId: "a" };
  assert.deepEqual(snapshotResumeOptions(live), {
    resume: true,
    resumeFromSequence: 5,
    existingMessageId: "a",
    replayPrefix: true,
    messages: [{ id: "u" }],
  });
  assert.deepEqual(snapshotResumeOptions(live, { replayPrefix: false }), { resume: true, resumeFromSequence: 5, messages });
  assert.deepEqual(snapshotResumeOptions({ ...live, status: "ended" }), { resume: false, messages });
  assert.deepEqual(resumeHeaders({ resumeFromSequence: 0, replayPrefix: true }), { "X-Resume-From-Sequence": "0" });
});

test("the re-attach delay grows, is capped, jittered, and never shorter than Retry-After", () => {
  assert.equal(reattachDelay(1, { random: () => 1 }), 400);
  assert.equal(reattachDelay(1, { random: () => 0 }), 200);
  assert.equal(reattachDelay(3, { random: () => 1 }), 1600);
  assert.equal(reattachDelay(10, { random: () => 1 }), 8000);
  assert.equal(reattachDelay(1, { random: () => 1, retryAfterSeconds: 3 }), 3000);
});

test("the re-attach wait ends early on the browser's online event and aborts with its signal", async () => {
  const events = new EventTarget();
  const started = Date.now();
  const waiting = waitForReattach(60_000, { events });
  events.dispatchEvent(new Event("online"));
  await waiting;
  assert.ok(Date.now() - started < 1000);
  const controller = new AbortController();
  const aborted = waitForReattach(60_000, { events, signal: controller.signal });
  controller.abort();
  await assert.rejects(aborted, (error) => error.name === "AbortError");
});

test("a resync trigger re-anchors once per identity, as HelixChat does (client.js shares the function)", async () => {
  const client = await import("../../../helix_django/static/helix_django/client.js");
  assert.equal(client.isResyncTrigger, isResyncTrigger);
  const seen = new Set();
  const superseded = { type: "data-attempt-superseded", data: { runId: "run_1", attemptId: "att_2", supersededAttemptId: "att_1" } };
  assert.equal(isResyncTrigger(superseded, seen), true);
  assert.equal(isResyncTrigger({ ...superseded }, seen), false); // re-delivered by the replay: once
  assert.equal(isResyncTrigger({ type: "data-attempt-superseded", data: { runId: "run_1", attemptId: "att_3" } }, seen), true);
  assert.equal(isResyncTrigger({ type: "data-helix-replay", data: { phase: "begin" } }, seen), false);
  const resync = { type: "data-stream-resync", data: { runId: "run_2", checkpointId: "c", truncateCheckpointId: "t" } };
  assert.equal(isResyncTrigger(resync, new Set(), { latestTruncateCheckpointId: "t" }), false); // the snapshot has it
  assert.equal(isResyncTrigger(resync, new Set(), { latestTruncateCheckpointId: "other" }), true);
});

test("Check status posts to the run's check_status route with the CSRF header and answers the outcome", async () => {
  globalThis.document = { cookie: "csrftoken=tok", getElementById: () => null };
  const calls = [];
  const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  const fetch = async (url, init = {}) => {
    calls.push({ url, method: init.method || "GET", headers: init.headers || {}, body: init.body });
    if (url.endsWith("/snapshot")) return json(200, { runId: "run_9", runStatus: "interrupted", messages: [], streamSequence: 4 });
    if (url.includes("/runs/run_busy/")) {
      return json(409, { error: "The generation is still running.", code: "state_run_not_actionable", cause: "check_status" });
    }
    return json(200, { action: "check_status", runId: "run_9", outcome: "completed", newRunId: "" });
  };
  try {
    const answer = await checkRunStatus({ baseUrl: "/helix/api/", sessionId: "s 1", runId: "run_9", fetch });
    assert.deepEqual(answer, { action: "check_status", runId: "run_9", outcome: "completed", newRunId: "" });
    assert.equal(calls[0].url, "/helix/api/sessions/s%201/runs/run_9/check_status");
    assert.equal(calls[0].method, "POST");
    assert.equal(calls[0].headers["X-CSRFToken"], "tok");

    // Without a run id, the chat's current run (from the snapshot); the transport offers the same.
    calls.length = 0;
    class DefaultChatTransport {
      constructor(options) {
        this.options = options;
      }
    }
    const transport = helixTransport({ sessionId: "s1", fetch, DefaultChatTransport, headers: () => ({ A: "1" }) });
    assert.equal((await transport.helix.checkStatus()).outcome, "completed");
    assert.deepEqual(
      calls.map((c) => [c.method, c.url]),
      [
        ["GET", "/helix/api/sessions/s1/snapshot"],
        ["POST", "/helix/api/sessions/s1/runs/run_9/check_status"],
      ],
    );
    assert.equal(calls[1].headers.A, "1");

    await assert.rejects(
      checkRunStatus({ sessionId: "s1", runId: "run_busy", fetch }),
      (error) => error instanceof HelixRequestError && error.status === 409 && error.cause === "check_status",
    );
    const offline = async () => Promise.reject(new TypeError("Failed to fetch"));
    await assert.rejects(checkRunStatus({ sessionId: "s1", runId: "run_9", fetch: offline }), (e) => e.status === 0);
  } finally {
    delete globalThis.document;
  }
});

test("every recovery action posts to its run route with CSRF; the inventory is read; the transport binds them", async () => {
  globalThis.document = { cookie: "csrftoken=tok", getElementById: () => null };
  const calls = [];
  const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  const fetch = async (url, init = {}) => {
    calls.push({ url, method: init.method || "GET", csrf: (init.headers || {})["X-CSRFToken"] });
    if (url.endsWith("/snapshot")) return json(200, { runId: "run_7", messages: [], streamSequence: 1 });
    if (url.endsWith("/recovery")) return json(200, { runId: "run_7", status: "interrupted", recoveryAction: "", actions: {} });
    const action = url.split("/").at(-1);
    return json(200, { action, runId: "run_7", outcome: "done", newRunId: action === "continue" ? "run_8" : "" });
  };
  try {
    assert.deepEqual([...RECOVERY_ACTIONS], ["continue", "keep", "discard", "regenerate", "check_status"]);
    const options = { sessionId: "s1", runId: "run_7", fetch };
    assert.equal((await continueRun(options)).newRunId, "run_8");
    assert.equal((await keepRun(options)).action, "keep");
    assert.equal((await discardRun(options)).action, "discard");
    assert.equal((await regenerateRun(options)).action, "regenerate");
    assert.equal((await recoveryInventory(options)).status, "interrupted");
    assert.deepEqual(
      calls.map((c) => [c.method, c.url.replace("/helix/api/sessions/s1/runs/run_7/", ""), c.csrf]),
      [
        ["POST", "continue", "tok"],
        ["POST", "keep", "tok"],
        ["POST", "discard", "tok"],
        ["POST", "regenerate", "tok"],
        ["GET", "recovery", undefined],
      ],
    );
    calls.length = 0;
    class DefaultChatTransport {}
    const { helix } = helixTransport({ sessionId: "s1", fetch, DefaultChatTransport });
    assert.equal((await helix.keep()).action, "keep"); // the chat's current run, from the snapshot
    assert.deepEqual(calls.map((c) => c.url.split("/").at(-1)), ["snapshot", "keep"]);
  } finally {
    delete globalThis.document;
  }
});

test("a snapshot holds a turn only when it has that user message", () => {
  const snapshot = { messages: [{ id: "u1", role: "user" }, { id: "a1", role: "assistant" }] };
  assert.equal(holdsTurn(snapshot, "u1"), true);
  assert.equal(holdsTurn(snapshot, "u2"), false);
  assert.equal(holdsTurn(snapshot, "a1"), false);
  assert.equal(holdsTurn(null, "u1"), false);
  assert.equal(lastUserMessageId([{ id: "u1", role: "user" }, { id: "a1", role: "assistant" }, { id: "u2", role: "user" }]), "u2");
  assert.equal(lastUserMessageId([]), null);
});
