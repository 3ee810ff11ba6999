// The run actions of HelixChat (client.js): Stop (cancel the run), Regenerate (a new run from
// the last safe context), and the recovery actions of an interrupted, failed or cancelled
// turn (Continue, Keep, Discard, Check status), each a JSON POST followed by a re-anchor on
// the snapshot, or by the answer's own stream when the server streams it.
//
// Every function takes the chat first and reads or updates its state.

import { networkError, parseError, responseError } from "./errors.js";
import { newRequestKey } from "./ids.js";
import { follow } from "./client-follow.js";
import { readSnapshot } from "./client-snapshot.js";
import { consume, open } from "./client-stream.js";

// Check status outcomes after which the same run goes on (POST .../check_status).
const FOLLOWED_OUTCOMES = ["reattached", "recovering"];

/** Stop = cancel the run on the server; the stream ends with it and the page settles. */
export async function stop(chat) {
  let runId = chat.runId;
  if (!runId || !chat.view().isBusy) {
    try {
      runId = (await readSnapshot(chat))?.runId;
    } catch {
      runId = chat.runId;
    }
  }
  if (!runId) return;
  await action(chat, chat.routes.cancel(chat.sessionId, runId), {}, { follow: false });
}

/**
 * Regenerate an answer: a new run from the last safe context (a deliberate new request key).
 * `messageId` is the assistant message to replace; null regenerates the latest turn when it
 * has no answer (stopped before any text, or its partial answer was discarded).
 */
export async function regenerate(chat, messageId = null) {
  const index = messageId == null ? chat.committed.length : chat.committed.findIndex((m) => m.id === messageId);
  if (index < 0) return;
  const history = chat.committed.slice(0, index);
  const gen = chat.newGeneration();
  chat.pending = null;
  chat.committed = history;
  chat.live = null;
  chat.setStatus("submitted");
  const body = { id: chat.sessionId, messages: history, trigger: "regenerate-message" };
  if (messageId != null) body.messageId = messageId;
  await follow(chat, gen, () => open(chat, gen, "POST", { "X-Helix-Request-Key": newRequestKey() }, body));
}

/** Continue an interrupted answer: a new generation from its partial state (000, "Continue"). */
export async function continueRun(chat, runId) {
  await action(chat, chat.routes.continueRun(chat.sessionId, runId), {});
}

/** Keep a partial answer as it is, without more inference. */
export async function keep(chat, runId) {
  await action(chat, chat.routes.keep(chat.sessionId, runId), {});
}

/** Discard a partial answer: remove the interrupted assistant turn. */
export async function discard(chat, runId) {
  await action(chat, chat.routes.discard(chat.sessionId, runId), {});
}

/**
 * Check status: ask the provider about the run's durable operation (no inference; the
 * admin's Check status). The page then re-reads the snapshot: a run the provider finished
 * shows its complete answer. Resolves to the server's answer `{action, runId, outcome,
 * newRunId}` (`outcome`: `completed`, or why the run stays interrupted, e.g.
 * `provider_in_progress`), also kept as the view's `statusCheck`; null when refused
 * (`error` says why).
 */
export async function checkStatus(chat, runId) {
  const found = (answer) => {
    chat.statusCheck = answer ? { runId, outcome: answer.outcome } : null;
  };
  // A run that goes on (re-attached, or followed by the server) is kept before the page
  // re-reads the snapshot and follows it live, so the page can say why while it follows.
  // Any other outcome is kept once the snapshot and its actions are read.
  const goesOn = (answer) => FOLLOWED_OUTCOMES.includes(answer?.outcome) && found(answer);
  const answer = await action(chat, chat.routes.checkStatus(chat.sessionId, runId), {}, { onAnswer: goesOn });
  found(answer);
  chat.emit();
  return answer;
}

/**
 * POST a JSON action, then re-anchor on the snapshot (and resume if a run went live).
 * Resolves to the action's JSON answer (null when refused, unreachable or streamed).
 * `onAnswer(answer)` runs with a JSON answer before the re-anchor.
 */
export async function action(chat, url, payload, { follow: followAfter = true, onAnswer = null } = {}) {
  chat.statusCheck = null; // what a Check status found is past once anything else is done
  if (followAfter) chat.setStatus("submitted");
  let response;
  try {
    response = await chat.fetchImpl(url, {
      method: "POST",
      headers: { ...chat.extraHeaders(), "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(payload),
      credentials: "same-origin",
    });
  } catch {
    chat.setStatus("error", { kind: "action", ...networkError().body, status: 0 });
    return null;
  }
  if (!response.ok) {
    const error = await responseError(response);
    chat.setStatus("error", { kind: "action", ...parseError(error), status: response.status });
    return null;
  }
  if (!followAfter) return null;
  if ((response.headers.get("Content-Type") || "").includes("text/event-stream")) {
    const gen = chat.newGeneration();
    const controller = new AbortController();
    chat.controller = controller;
    chat.setStatus("streaming");
    await follow(chat, gen, async () => consume(chat, gen, response.body, controller));
    return null;
  }
  const answer = await response.json().catch(() => null);
  onAnswer?.(answer);
  await chat.load();
  return answer;
}
