// Resume targets of the chat route (002, "The canonical client"): shared by client.js
// (HelixChat) and aisdk.js (the AI SDK kit), so both speak the same headers.

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
