// The URLs of helix_django's routes under the prefix where a site mounts helix_django.urls.
// Override any of them by passing `routes` to HelixChat / mountChat.

/**
 * @param {string} baseUrl  e.g. "/helix/api" (no trailing slash)
 */
export function routesFor(baseUrl) {
  const base = baseUrl.replace(/\/+$/, "");
  const session = (id) => `${base}/sessions/${encodeURIComponent(id)}`;
  const run = (id, runId) => `${session(id)}/runs/${encodeURIComponent(runId)}`;
  return {
    sessions: () => `${base}/sessions/`,
    session: (id) => `${session(id)}/`,
    chat: (id) => `${session(id)}/chat`,
    snapshot: (id) => `${session(id)}/snapshot`,
    cancel: (id, runId) => `${run(id, runId)}/cancel`,
    recovery: (id, runId) => `${run(id, runId)}/recovery`,
    continueRun: (id, runId) => `${run(id, runId)}/continue`,
    keep: (id, runId) => `${run(id, runId)}/keep`,
    discard: (id, runId) => `${run(id, runId)}/discard`,
    regenerate: (id, runId) => `${run(id, runId)}/regenerate`,
    checkStatus: (id, runId) => `${run(id, runId)}/check_status`,
    queued: (id, queuedMessageId) => `${session(id)}/queued/${encodeURIComponent(queuedMessageId)}`,
  };
}
