// The recovery card of a partial answer and the notice of a run that ended without text.
//
// Partial answers are labelled by what happened (interrupted, stopped, failed) and offer
// the recovery actions by their true names: Regenerate (a new run from the last safe
// context), Continue (a new generation from the partial state), Keep (keep the partial
// text, no inference), Discard (remove it). Regenerate and Discard replace or remove text,
// so each asks to be confirmed first; Keep is never a dead end (the other actions stay
// offered while the server offers them). Check status (offered where the run's provider
// operation can be asked about) asks the provider: a finished answer then shows complete,
// else the card says what it answered.
//
// `page` is the chat page's state these functions share: { chat, confirming, invalidate() }.
// `confirming` is the action waiting for confirmation, { key: "<action>:<run or message id>" }
// or null; invalidate() re-renders every message on the next frame.

import { confirmText, partialLabel, statusCheckText } from "./chat-texts.js";
import { el } from "./dom.js";
import { gettext, interpolate } from "./i18n.js";

/** Return the recovery state of `runId` from GET .../recovery (null while unknown). */
export function recoveryOf(view, runId) {
  return view.recovery && view.recovery.runId === runId ? view.recovery : null;
}

/** Return the card under a partial answer: what happened, what a Check status found, the actions. */
export function partialNotice(page, message, helix, context) {
  const [label, detail] = partialLabel(helix.status, helix.cancelledBy);
  const recovery = recoveryOf(context.view, helix.runId);
  const kept = recovery?.recoveryAction === "keep_partial";
  const actionable = context.isLast && context.idle;
  const check = context.view.statusCheck?.runId === helix.runId ? context.view.statusCheck : null;
  return el(
    "div",
    // Kept: the user chose this text as the answer, so the notice is a quiet label, no warning.
    { class: kept ? "hx-partial-notice is-kept" : "hx-partial-notice", role: "status", "data-testid": "partial-notice", "data-run-status": helix.status },
    el("div", {}, el("strong", {}, interpolate(kept ? gettext("%(label)s · kept as partial") : gettext("%(label)s · partial answer"), { label })), " ", detail),
    check && check.outcome !== "completed" ? statusCheckLine(check) : null,
    actionable ? recoveryActions(page, message.id, helix.runId, recovery) : null,
  );
}

/** Return the line that says what a Check status found (`check`: the view's statusCheck). */
export function statusCheckLine(check, cls = null) {
  return el("div", { class: cls, "data-testid": "status-check", "data-outcome": check.outcome }, statusCheckText(check.outcome));
}

// Regenerate, Continue, Keep, Discard, Check status: each shown only when the server says it
// applies (until it answered, Regenerate only), each named for what it does.
function recoveryActions(page, messageId, runId, recovery) {
  const chat = page.chat;
  const available = (name) => (recovery ? recovery.actions?.[name]?.available : name === "regenerate");
  const chip = (name, label, title, onclick, cls = "hx-chip") =>
    available(name) ? el("button", { type: "button", class: cls, title, onclick, "data-action": name }, label) : null;
  const confirmed = (name, label, title, onclick, cls) =>
    available(name) ? confirmable(page, name, runId, cls, label, title, onclick) : null;
  // While one action asks to be confirmed, its question and its two answers are all the row shows.
  const asking = page.confirming?.key.endsWith(`:${runId}`) ? page.confirming.key.split(":")[0] : null;
  const only = (name, node) => (!asking || asking === name ? node : null);
  return el(
    "div",
    { class: "hx-actions" },
    only("regenerate", confirmed("regenerate", gettext("Regenerate"), gettext("Start over from the last safe point (a new answer)"), () => chat.regenerate(messageId), "hx-chip is-primary")),
    only("continue", chip("continue", gettext("Continue"), gettext("A new generation that continues from the partial text"), () => chat.continueRun(runId))),
    only("keep", chip("keep", gettext("Keep"), gettext("Keep the partial text as it is, without more inference"), () => chat.keep(runId))),
    only("discard", confirmed("discard", gettext("Discard"), gettext("Remove the partial answer from the conversation"), () => chat.discard(runId), "hx-chip is-danger")),
    only("check_status", chip("check_status", gettext("Check status"), gettext("Ask the model whether this answer finished meanwhile"), () => chat.checkStatus(runId))),
  );
}

/**
 * Return a button whose first click asks "are you sure?" in place; "Yes, <action>" runs
 * `act`, "No, go back" leaves everything as it was.
 */
export function confirmable(page, name, id, cls, label, title, act) {
  const key = `${name}:${id}`;
  if (page.confirming?.key !== key) {
    const ask = () => {
      page.confirming = { key };
      page.invalidate();
    };
    return el("button", { type: "button", class: cls, title, onclick: ask, "data-action": name }, label);
  }
  const [question, yes] = confirmText(name);
  const done = () => {
    page.confirming = null;
    page.invalidate();
  };
  return el(
    "span",
    { class: "hx-confirm", role: "group", "data-testid": "confirm", "data-action": name },
    el("span", {}, question, " "),
    el("button", { type: "button", class: "hx-chip is-danger", "data-confirm": "yes", onclick: () => { done(); act(); } }, yes),
    el("button", { type: "button", class: "hx-chip", "data-confirm": "no", onclick: done }, gettext("No, go back")),
  );
}

/**
 * Return the notice of a run that ended without a message to mark (stopped before any
 * text, or a failed snapshot status with no partial row), or null.
 */
export function runNotice(page, view, lastAssistant) {
  const snapshot = view.snapshot;
  if (!snapshot || view.isBusy || view.pending) return null;
  const runStatus = snapshot.runStatus;
  const covered = lastAssistant?.metadata?.helix?.runId === snapshot.runId;
  if (covered || !["cancelled", "interrupted", "failed"].includes(runStatus)) return null;
  const last = view.messages[view.messages.length - 1];
  if (!last || last.role !== "user") return null;
  const [label] = partialLabel(runStatus, snapshot.cancelledBy);
  const recovery = recoveryOf(view, snapshot.runId);
  const discarded = recovery?.recoveryAction === "discard_partial";
  const regenerate = recovery ? recovery.actions?.regenerate?.available : true;
  return el(
    "div",
    { class: "hx-run-notice", role: "status", "data-testid": "run-notice", "data-run-status": runStatus },
    el(
      "strong",
      {},
      // Until the recovery state is read, say only what is certain.
      discarded
        ? gettext("Partial answer discarded.")
        : interpolate(recovery ? gettext("%(label)s before any text was written.") : gettext("%(label)s · no answer text was kept."), { label }),
    ),
    regenerate
      ? el(
          "div",
          { class: "hx-actions" },
          el("button", { type: "button", class: "hx-chip is-primary", "data-action": "regenerate", onclick: () => page.chat.regenerate(null) }, gettext("Regenerate")),
        )
      : null,
  );
}
