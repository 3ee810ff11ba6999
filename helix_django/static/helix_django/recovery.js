// The recovery actions of an interrupted, failed or cancelled run, for the AI SDK kit
// (000, "Recovery actions"; the routes `runs/<id>/recovery` and `runs/<id>/<action>`).
// Plain ES module: aisdk.js re-exports it, useHelixChat (react.js) binds it to its chat.
//
//   await continueRun({ sessionId });            // the chat's current run
//   await keepRun({ sessionId, runId });         // {action, runId, outcome, newRunId}
//   await recoveryInventory({ sessionId });      // {runId, status, recoveryAction, actions}

import { csrfHeaders } from "./csrf.js";
import { fetchSnapshotWithRetry, networkError, responseError } from "./errors.js";
import { routesFor } from "./routes.js";

/** The owner's recovery actions, as the routes name them. */
export const RECOVERY_ACTIONS = Object.freeze(["continue", "keep", "discard", "regenerate", "check_status"]);

const ROUTE_OF = {
  continue: "continueRun",
  keep: "keep",
  discard: "discard",
  regenerate: "regenerate",
  check_status: "checkStatus",
};

async function targetRun({ routes, sessionId, runId, doFetch, headers }) {
  if (runId) return runId;
  const snapshot = await fetchSnapshotWithRetry(routes.snapshot(sessionId), { fetch: doFetch, headers });
  return snapshot?.runId || null;
}

async function request(doFetch, url, init) {
  let response;
  try {
    response = await doFetch(url, { credentials: "same-origin", ...init });
  } catch {
    throw networkError();
  }
  if (!response.ok) throw await responseError(response);
  return response.json();
}

/**
 * POST one recovery `action` (one of RECOVERY_ACTIONS) on a run, with the CSRF header.
 * `runId` defaults to the chat's current run (read from the snapshot).
 * Resolves to `{action, runId, outcome, newRunId}` (`newRunId`: the run the action started,
 * empty when none did), or null when the chat has no run.
 * @throws {HelixRequestError} when refused (e.g. 409 `state_run_not_actionable`, whose
 *   `error` says why) or unreachable (status 0)
 */
export async function runAction({ action, baseUrl = "/helix/api", sessionId, runId, fetch: baseFetch, headers } = {}) {
  if (!ROUTE_OF[action]) throw new TypeError(`unknown recovery action: ${action}`);
  const doFetch = baseFetch || globalThis.fetch.bind(globalThis);
  const routes = routesFor(baseUrl);
  const target = await targetRun({ routes, sessionId, runId, doFetch, headers });
  if (!target) return null;
  return request(doFetch, routes[ROUTE_OF[action]](sessionId, target), {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json", ...csrfHeaders(), ...headers },
    body: "{}",
  });
}

/**
 * Continue = a new generation from the run's partial state (000, "Continue").
 * See runAction for the options, result and errors.
 */
export const continueRun = (options) => runAction({ ...options, action: "continue" });

/** Keep the run's partial answer as it is, without more inference. See runAction. */
export const keepRun = (options) => runAction({ ...options, action: "keep" });

/** Discard the run's partial answer (the interrupted assistant turn). See runAction. */
export const discardRun = (options) => runAction({ ...options, action: "discard" });

/**
 * Regenerate the run's answer from the last safe checkpoint. See runAction; refused with
 * its own code when a completed side effect would be dropped without confirmation.
 */
export const regenerateRun = (options) => runAction({ ...options, action: "regenerate" });

/**
 * Check status = ask the provider about the run's durable operation (no inference): a run
 * the provider finished completes from its output. `outcome`: `completed`, or why the run
 * stays interrupted (e.g. `provider_in_progress`). See runAction.
 */
export const checkRunStatus = (options) => runAction({ ...options, action: "check_status" });

/**
 * Which recovery actions apply to a run (`GET .../recovery`). `runId` defaults to the
 * chat's current run. Resolves to `{runId, status, recoveryAction, actions}` where
 * `actions[name]` is `{available, reason}` for each of RECOVERY_ACTIONS, or null when the
 * chat has no run.
 * @throws {HelixRequestError} when refused or unreachable (status 0)
 */
export async function recoveryInventory({ baseUrl = "/helix/api", sessionId, runId, fetch: baseFetch, headers } = {}) {
  const doFetch = baseFetch || globalThis.fetch.bind(globalThis);
  const routes = routesFor(baseUrl);
  const target = await targetRun({ routes, sessionId, runId, doFetch, headers });
  if (!target) return null;
  return request(doFetch, routes.recovery(sessionId, target), { headers: { Accept: "application/json", ...headers } });
}
