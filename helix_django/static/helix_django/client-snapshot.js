// The snapshot side of HelixChat (client.js): read a session's snapshot, render it as the
// committed conversation with its cursor, read the recovery actions of a turn that ended
// interrupted, failed or cancelled, and re-anchor (read the snapshot, then resume from its
// cursor while its run is live).
//
// Every function takes the chat first and reads or updates its state.

import { SnapshotUnavailableError, fetchSnapshotWithRetry, networkError } from "./errors.js";
import { queuedMessagesOf } from "./queue.js";
import { resumeHeaders, snapshotResumeOptions } from "./resume.js";
import { open } from "./client-stream.js";

/** Fetch the session's snapshot (null when the session has none), retrying a failed read. */
export async function readSnapshot(chat) {
  return fetchSnapshotWithRetry(chat.routes.snapshot(chat.sessionId), {
    fetch: chat.fetchImpl,
    backoffMs: chat.snapshotBackoffMs,
    headers: chat.extraHeaders(),
  });
}

/** Replace the rendered conversation by a snapshot; returns its resume options. */
export function applySnapshot(chat, snapshot) {
  chat.loaded = true;
  chat.snapshot = snapshot;
  chat.runId = snapshot?.runId ?? null;
  chat.runStatus = snapshot?.runStatus ?? null;
  chat.queued = queuedMessagesOf(snapshot);
  if (!snapshot) {
    chat.committed = [];
    chat.live = null;
    chat.cursor = 0;
    chat.cursorTrusted = true;
    return { resume: false, messages: [] };
  }
  const options = snapshotResumeOptions(snapshot);
  chat.committed = options.messages;
  chat.live = null;
  chat.cursor = snapshot.streamSequence;
  chat.cursorTrusted = true;
  if (chat.pending && snapshot.messages.some((m) => m.id === chat.pending.message.id)) chat.pending = null;
  if (!options.resume) void loadRecovery(chat, snapshot);
  return options;
}

/**
 * For a turn that ended interrupted, failed or cancelled, read which recovery actions
 * apply (and what was already done): `recovery = {runId, recoveryAction, actions}`.
 * Without that answer the page offers Regenerate only.
 */
export async function loadRecovery(chat, snapshot) {
  const { runId, runStatus } = snapshot;
  if (chat.recovery?.runId !== runId) chat.recovery = null;
  if (!runId || !["interrupted", "failed", "cancelled"].includes(runStatus) || !chat.routes.recovery) return;
  try {
    const response = await chat.fetchImpl(chat.routes.recovery(chat.sessionId, runId), {
      headers: { Accept: "application/json", ...chat.extraHeaders() },
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!response.ok || chat.snapshot?.runId !== runId) return;
    chat.recovery = await response.json();
    chat.emit();
  } catch {
    // Keep the conservative default (Regenerate only).
  }
}

/** Read the snapshot, render it, and open the resume when it is live. */
export async function reanchorOpen(chat, gen) {
  let snapshot;
  try {
    snapshot = await readSnapshot(chat);
  } catch (error) {
    if (error instanceof SnapshotUnavailableError && error.status === 0) throw networkError();
    throw error;
  }
  if (gen !== chat.gen) return { stale: true };
  const options = applySnapshot(chat, snapshot);
  chat.emit();
  if (!options.resume) return { settled: true };
  return open(chat, gen, "GET", resumeHeaders(options));
}
