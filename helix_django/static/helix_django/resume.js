// Resume targets of the chat route (002, "The canonical client"), and the resync triggers
// that make a client re-anchor on the snapshot: shared by client.js (HelixChat) and
// aisdk.js / react.js (the AI SDK kit), so both speak the same headers and re-anchor alike.

/**
 * @typedef {{resumeFromSequence?: number, existingMessageId?: string, replayPrefix?: boolean}} ResumeTarget
 * @typedef {ResumeTarget & {resume: boolean, messages: object[]}} ResumeOptions
 */

/**
 * The resume headers for a target. X-Helix-Replay-Prefix is sent only with both
 * `replayPrefix` and `existingMessageId`.
 * @param {ResumeTarget} [target]
 * @returns {Record<string, string>}
 */
export function resumeHeaders({ resumeFromSequence, existingMessageId, replayPrefix } = {}) {
  const headers = {};
  if (resumeFromSequence != null) headers["X-Resume-From-Sequence"] = String(resumeFromSequence);
  if (existingMessageId) headers["X-Existing-Message-Id"] = existingMessageId;
  if (replayPrefix && existingMessageId) headers["X-Helix-Replay-Prefix"] = "1";
  return headers;
}

/**
 * Seed and resume target for a snapshot (002, snapshotResumeOptions): a live snapshot
 * (`active` / `paused`) resumes from its cursor without its in-flight message, which the
 * replay prefix rebuilds; an ended or failed one is seeded whole and not resumed.
 * `{replayPrefix: false}` keeps every message and omits the flag.
 * @param {{status: string, messages: object[], streamSequence: number, resumeMessageId?: string}} snapshot
 * @param {{replayPrefix?: boolean}} [options]
 * @returns {ResumeOptions}
 */
export function snapshotResumeOptions(snapshot, { replayPrefix = true } = {}) {
  const live = snapshot.status === "active" || snapshot.status === "paused";
  if (!live) return { resume: false, messages: snapshot.messages };
  if (!snapshot.resumeMessageId || !replayPrefix) {
    return { resume: true, resumeFromSequence: snapshot.streamSequence, messages: snapshot.messages };
  }
  return {
    resume: true,
    resumeFromSequence: snapshot.streamSequence,
    existingMessageId: snapshot.resumeMessageId,
    replayPrefix: true,
    messages: snapshot.messages.filter((m) => m.id !== snapshot.resumeMessageId),
  };
}

/** Chunk types that make a client re-anchor on the snapshot (002, "Resync"). */
export const RESYNC_TRIGGERS = ["data-stream-resync", "data-attempt-superseded", "data-tool-output-elsewhere"];

/** Identity of a resync trigger part, so a re-delivered trigger re-anchors once. */
export function triggerIdentity(chunk) {
  const data = chunk.data || {};
  if (chunk.type === "data-stream-resync") return `resync:${data.runId ?? ""}:${data.checkpointId ?? ""}`;
  if (chunk.type === "data-attempt-superseded") return `attempt:${data.runId ?? ""}:${data.attemptId ?? ""}`;
  return `elsewhere:${data.runId ?? ""}:${data.toolCallId ?? ""}`;
}

/**
 * Whether `chunk` (a UI chunk, or the data part a `useChat` `onData` gets) makes the client
 * re-anchor on the snapshot: a resync trigger not seen before (its identity is added to
 * `seen`), unless it names the truncate checkpoint `snapshot` already reflects. What the
 * rendered message holds after `data-attempt-superseded` (the superseded attempt's parts,
 * then the winning attempt's) or the other triggers is not the run's truth: the snapshot,
 * with the replay prefix of its in-flight message, is.
 * @param {{type: string, data?: object}} chunk
 * @param {Set<string>} seen
 * @param {{latestTruncateCheckpointId?: string | null} | null} [snapshot]
 */
export function isResyncTrigger(chunk, seen, snapshot) {
  if (!RESYNC_TRIGGERS.includes(chunk?.type)) return false;
  const identity = triggerIdentity(chunk);
  if (seen.has(identity)) return false;
  seen.add(identity);
  const truncate = chunk.data?.truncateCheckpointId;
  return !(truncate != null && truncate === snapshot?.latestTruncateCheckpointId);
}
