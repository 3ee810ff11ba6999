// The chat page's words: labels of partial answers, confirmations, Check status outcomes,
// error explanations and conversation names. Each is looked up when shown (functions, not
// constants): the translation catalog may be set after import.

import { gettext, interpolate } from "./i18n.js";

const PARTIAL_LABELS = () => ({
  interrupted: [gettext("Interrupted"), gettext("The generation stopped before it finished; this is the text it had written.")],
  cancelled: [gettext("Stopped"), gettext("You stopped this answer; this is the text it had written.")],
  failed: [gettext("Failed"), gettext("The model failed before finishing; this is the text it had written.")],
});
// A cancelled run says who stopped it (the run's `cancelledBy`): never a false "you".
const CANCELLED_BY_LABELS = () => ({
  staff: [gettext("Stopped by support"), gettext("Support staff stopped this answer; this is the text it had written.")],
  system: [gettext("Stopped"), gettext("The system stopped this answer; this is the text it had written.")],
  follow_up: [gettext("Stopped"), gettext("Your next message stopped this answer; this is the text it had written.")],
});

/** Return `[label, detail]` of a partial answer whose run ended `status` (stopped by `cancelledBy`). */
export function partialLabel(status, cancelledBy) {
  const byWho = CANCELLED_BY_LABELS();
  if (status === "cancelled" && byWho[cancelledBy]) return byWho[cancelledBy];
  return PARTIAL_LABELS()[status] || [gettext("Incomplete"), gettext("This answer did not finish.")];
}

/**
 * Return `[question, yes]` of an action that replaces or removes what the user sees
 * (`regenerate`, `discard`): "Yes, <action>" acts, "No, go back" leaves all as it was.
 */
export function confirmText(action) {
  return {
    regenerate: [gettext("Replace this answer with a new one?"), gettext("Yes, regenerate")],
    discard: [gettext("Remove the partial answer from the conversation?"), gettext("Yes, discard")],
  }[action];
}

// Outcomes after which the same run goes on and the page follows its answer.
const FOLLOWED = new Set(["reattached", "recovering"]);

/** Return true when a Check status `outcome` means the answer goes on (the page follows it live). */
export function isFollowedOutcome(outcome) {
  return FOLLOWED.has(outcome);
}

/** Return what a Check status found (`outcome` of POST .../check_status), when the answer is not complete. */
export function statusCheckText(outcome) {
  const known = {
    provider_in_progress: gettext("Checked: the model is still writing this answer. Check again in a moment."),
    reattached: gettext("Checked: the model is still writing this answer. The server picked it up again; the rest appears here as it is written."),
    recovering: gettext("Checked: the model is still writing this answer. The server is following it; the rest appears here when it is done."),
    cancel_cancelled: gettext("Checked: the model's work on this answer is stopped."),
    cancel_already_finished: gettext("Checked: the model had already finished; this answer stays stopped."),
    cancel_failed: gettext("Checked: the model could not confirm that it stopped; it will be asked again."),
    cancel_unknown: gettext("Checked: the model could not confirm that it stopped; it will be asked again."),
    status_unavailable: gettext("Checked: the model could not be asked right now. Try again later."),
    provider_failed: gettext("Checked: the model reports that this answer failed."),
    changed_meanwhile: gettext("This answer changed meanwhile; the page shows its current state."),
  };
  return known[outcome] || interpolate(gettext("Checked: the answer did not finish (%(reason)s)."), { reason: outcome });
}

/** Return why a send did nothing while an answer is being written. */
export function busyHint() {
  return gettext("An answer is still being written in this conversation. Wait for it to finish, or press Stop.");
}

// The page's own words for the typed errors it explains (by wire code, which stays English).
const ERROR_TEXT = () => ({
  state_already_running: gettext("Another answer is still being written in this conversation. Retry when it has finished."),
  network_error: gettext("The server could not be reached."),
  transport_stream_drop: gettext("The connection to the server was lost."),
  state_history_incomplete: gettext("The conversation could not be read right now."),
  validation_payload_too_large: gettext("The message is too long."),
  state_request_key_conflict: gettext("This message conflicts with an earlier request."),
});

/** Return the sentence that explains `error` (a client error `{code, error}`), "" for none. */
export function describeError(error) {
  if (!error) return "";
  return ERROR_TEXT()[error.code] || error.error || gettext("Something went wrong.");
}

/** Return the name of a listed session: its title, else "Chat of <date created>". */
export function sessionLabel(session) {
  if (session.title) return session.title;
  const created = session.createdAt ? new Date(session.createdAt) : null;
  if (!created) return gettext("Untitled chat");
  const style = { dateStyle: "medium", timeStyle: "short" };
  let date;
  try {
    // The page's language (<html lang>) formats the date, as it names the chat.
    date = created.toLocaleString(document.documentElement.lang || [], style);
  } catch {
    date = created.toLocaleString([], style); // a lang attribute Intl does not know
  }
  return interpolate(gettext("Chat of %(date)s"), { date });
}
