// A chat page on top of HelixChat: sessions sidebar, conversation, composer, recovery actions.
//
// mountChat(root, options) expects the markup of templates/helix_django/chat.html:
//   [data-hx="sessions"] [data-hx="new-chat"] [data-hx="title"] [data-hx="connection"]
//   [data-hx="conversation"] [data-hx="composer"] [data-hx="input"] [data-hx="send"] [data-hx="stop"]
// options: { sessionId, baseUrl, chatUrl(id) -> page URL of a session, csrfToken,
//            newSession: true when no session `sessionId` exists yet (a chat id just minted),
//            client: extra HelixChat options (reattach, stallMs, snapshotBackoffMs) }
// A chat id minted here or by the server (newSession) is opened without a snapshot request
// until its first send creates the session.
//
// Partial answers are labelled by what happened (interrupted, stopped, failed) and offer
// the recovery actions by their true names (000, "Recovery actions should reflect certainty"):
// Regenerate (a new run from the last safe context), Continue (a new generation from the
// partial state), Keep (keep the partial text, no inference), Discard (remove it).
// Regenerate and Discard replace or remove text, so each asks to be confirmed first; Keep
// is never a dead end (the other actions stay offered while the server offers them).
// Check status (offered where the run's provider operation can be asked about) asks the
// provider: a finished answer then shows complete, else the notice says what it answered.

import { HelixChat, newMessageId, routesFor, textOf } from "./client.js";
import { gettext, interpolate } from "./i18n.js";

// Texts are looked up when shown (functions, not constants): the catalog may be set after import.
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

function partialLabel(status, cancelledBy) {
  const byWho = CANCELLED_BY_LABELS();
  if (status === "cancelled" && byWho[cancelledBy]) return byWho[cancelledBy];
  return PARTIAL_LABELS()[status] || [gettext("Incomplete"), gettext("This answer did not finish.")];
}

// Actions that replace or remove what the user sees: confirmed in place before they act.
// Each names its own two choices: "Yes, <action>" acts, "No, go back" leaves all as it was.
const CONFIRM_TEXT = () => ({
  regenerate: [gettext("Replace this answer with a new one?"), gettext("Yes, regenerate")],
  discard: [gettext("Remove the partial answer from the conversation?"), gettext("Yes, discard")],
});
// What a Check status found (`outcome` of POST .../check_status), when the answer stays partial.
function statusCheckText(outcome) {
  const known = {
    provider_in_progress: gettext("Checked: the model is still writing this answer. Check again in a moment."),
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
const BUSY_HINT = () => gettext("An answer is still being written in this conversation. Wait for it to finish, or press Stop.");

// The page's own words for the typed errors it explains (by wire code, which stays English).
const ERROR_TEXT = () => ({
  state_already_running: gettext("Another answer is still being written in this conversation. Retry when it has finished."),
  network_error: gettext("The server could not be reached."),
  transport_stream_drop: gettext("The connection to the server was lost."),
  state_history_incomplete: gettext("The conversation could not be read right now."),
  validation_payload_too_large: gettext("The message is too long."),
  state_request_key_conflict: gettext("This message conflicts with an earlier request."),
});

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function describeError(error) {
  if (!error) return "";
  return ERROR_TEXT()[error.code] || error.error || gettext("Something went wrong.");
}

function sessionLabel(session) {
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

/** Mount the chat page on `root`; returns a controller with `open(sessionId)`. */
export function mountChat(root, options) {
  const q = (name) => root.querySelector(`[data-hx="${name}"]`);
  const routes = options.routes || routesFor(options.baseUrl || "/helix/api");
  const csrf = () => options.csrfToken || document.cookie.match(/(?:^|; )csrftoken=([^;]+)/)?.[1] || "";
  const headers = () => ({ "X-CSRFToken": csrf() });
  const ui = {
    conversation: q("conversation"),
    sessions: q("sessions"),
    title: q("title"),
    connection: q("connection"),
    input: q("input"),
    send: q("send"),
    stop: q("stop"),
    composer: q("composer"),
  };
  let chat = null;
  // Chat ids minted for this page that have no session yet (nothing was sent in them).
  const minted = new Set(options.newSession ? [options.sessionId] : []);
  let sessions = [];
  let sessionsError = null;
  const rendered = new Map();
  let frame = 0;
  // The action waiting for confirmation: { key: "<action>:<run or message id>", run: () => ... } or null.
  let confirming = null;
  // Reconnect attempts of the current drop (the client reports each attempt as "reconnecting").
  let reconnects = 0;
  let hint = "";
  let listedTitle = "";

  // --- sessions sidebar ---------------------------------------------------------------

  async function loadSessions() {
    try {
      const response = await fetch(routes.sessions(), { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!response.ok) throw new Error(String(response.status));
      const body = await response.json();
      sessions = Array.isArray(body) ? body : body.results || body.sessions || [];
      sessionsError = null;
    } catch {
      sessionsError = gettext("Conversations could not be loaded.");
    }
    renderSessions();
    if (chat) scheduleRender();
  }

  function renderSessions() {
    const current = chat?.sessionId;
    const items = sessions.map((session) =>
      el(
        "li",
        {},
        el(
          "a",
          {
            href: options.chatUrl(session.id),
            class: session.id === current ? "hx-session is-current" : "hx-session",
            "aria-current": session.id === current ? "page" : null,
            "data-session-id": session.id,
            onclick: (event) => {
              event.preventDefault();
              open(session.id, { push: true });
            },
          },
          // The current conversation is named as its header names it (one name per conversation).
          el("span", { class: "hx-session-title" }, session.id === current && listedTitle ? listedTitle : sessionLabel(session)),
        ),
      ),
    );
    if (current && !sessions.some((s) => s.id === current)) {
      const title = chatTitle() || (chat?.view().loaded && !chat.messages.length ? gettext("New chat") : gettext("Conversation"));
      items.unshift(el("li", {}, el("span", { class: "hx-session is-current", "data-testid": "current-session" }, title)));
    }
    const list = el("ul", {}, items);
    ui.sessions.replaceChildren(list);
    if (sessionsError) {
      ui.sessions.append(
        el(
          "p",
          { class: "hx-sessions-error" },
          sessionsError,
          " ",
          el("button", { type: "button", class: "hx-link", onclick: loadSessions }, gettext("Retry")),
        ),
      );
    }
  }

  function chatTitle() {
    const first = chat?.messages.find((m) => m.role === "user");
    const text = first ? textOf(first).trim() : "";
    return text.length > 60 ? `${text.slice(0, 57)}…` : text;
  }

  // --- conversation ---------------------------------------------------------------------

  function scheduleRender() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      render();
    });
  }

  function render() {
    const view = chat.view();
    const nearBottom = ui.conversation.scrollHeight - ui.conversation.scrollTop - ui.conversation.clientHeight < 80;
    const listed = sessions.find((session) => session.id === chat.sessionId);
    // A session's own title (given when it was created, by this page or through the API) wins
    // over its first message.
    const title = listed?.title || chatTitle() || (listed ? sessionLabel(listed) : view.loaded ? gettext("New chat") : gettext("Conversation"));
    ui.title.textContent = title;
    document.title = `${title} · Helix`;
    if (title !== listedTitle) {
      listedTitle = title;
      renderSessions(); // the sidebar names a new conversation as the header does
    }
    renderHint(view);
    renderConnection(view);
    renderComposer(view);
    ui.conversation.setAttribute("aria-busy", view.status === "loading" ? "true" : "false");

    if (view.status === "error" && view.error?.kind === "snapshot" && !view.messages.length) {
      rendered.clear();
      ui.conversation.replaceChildren(snapshotErrorState(view.error));
      return;
    }
    if (!view.loaded && !view.messages.length) {
      rendered.clear();
      const text = view.status === "reconnecting" ? gettext("Connecting to the server…") : gettext("Loading conversation…");
      ui.conversation.replaceChildren(el("div", { class: "hx-empty", "data-testid": "loading" }, text));
      return;
    }

    const nodes = [];
    const lastAssistant = [...view.messages].reverse().find((m) => m.role === "assistant");
    const seen = new Set();
    for (const message of view.messages) {
      seen.add(message.id);
      const isLive = message.id === view.liveMessageId && view.isBusy;
      const isPending = view.pending?.message.id === message.id;
      const context = {
        isLive,
        isPending,
        pendingError: isPending ? view.pending.error : null,
        isLast: message === lastAssistant,
        idle: !view.isBusy,
        view,
      };
      const signature = JSON.stringify([
        message.parts,
        message.metadata,
        isLive,
        isPending,
        context.pendingError,
        context.isLast && context.idle,
        context.isLast ? view.recovery : null,
        context.isLast ? view.statusCheck : null,
        view.status,
        context.isLast ? confirming?.key : null,
      ]);
      let entry = rendered.get(message.id);
      if (!entry || entry.signature !== signature) {
        const node = renderMessage(message, context);
        if (entry) entry.node.replaceWith(node);
        entry = { node, signature };
        rendered.set(message.id, entry);
      }
      nodes.push(entry.node);
    }
    for (const id of [...rendered.keys()]) if (!seen.has(id)) rendered.delete(id);
    const notice = runNotice(view, lastAssistant);
    if (notice) nodes.push(notice);
    const banner = errorBanner(view);
    if (banner) nodes.push(banner);
    if (!nodes.length) nodes.push(emptyState());
    ui.conversation.replaceChildren(...nodes);
    if (nearBottom || view.isBusy) ui.conversation.scrollTop = ui.conversation.scrollHeight;
  }

  function renderConnection(view) {
    const labels = {
      loading: [gettext("Loading"), "is-idle"],
      ready: [gettext("Connected"), "is-ok"],
      submitted: [gettext("Sending…"), "is-live"],
      streaming: [gettext("Live"), "is-live"],
      reconnecting: [
        reconnects > 0
          ? interpolate(gettext("Reconnecting… (attempt %(attempt)s of %(max)s)"), {
              attempt: reconnects,
              max: chat.reattach?.maxAttempts ?? "?",
            })
          : gettext("Reconnecting…"),
        "is-warn",
      ],
      error: [view.error?.kind === "snapshot" ? gettext("Unavailable") : gettext("Attention"), "is-error"],
    };
    const [label, cls] = labels[view.status] || ["", ""];
    ui.connection.textContent = label;
    ui.connection.className = `hx-connection ${cls}`;
    ui.connection.dataset.status = view.status;
  }

  function renderComposer(view) {
    ui.send.hidden = view.isBusy;
    ui.stop.hidden = !view.isBusy;
    // Stopping needs the server: while it cannot be reached, Stop would only pretend.
    ui.stop.disabled = view.status === "submitted" || view.status === "reconnecting";
    ui.stop.title = view.status === "reconnecting" ? gettext("The server cannot be reached; the answer cannot be stopped now.") : "";
    ui.send.disabled = view.status === "loading" || (view.error?.kind === "snapshot" && !view.messages.length);
  }

  function renderMessage(message, context) {
    const helix = message.metadata?.helix || {};
    const partial = message.role === "assistant" && helix.partial;
    const classes = ["hx-message", `hx-${message.role}`];
    if (context.isLive) classes.push("is-streaming");
    if (partial) classes.push("is-partial");
    if (partial && recoveryOf(context.view, helix.runId)?.recoveryAction === "keep_partial") classes.push("is-kept");
    if (context.isPending) classes.push("is-unsent");
    const body = el("div", { class: "hx-bubble" });
    let paragraph = null;
    for (const part of message.parts || []) {
      if (part.type === "text") {
        // A continuation is a new text part of the same answer: it goes on in the same block,
        // mid-sentence if that is where the first part stopped (no line break of our own).
        if (!paragraph) body.append((paragraph = el("div", { class: "hx-paragraph" })));
        paragraph.append(el("span", { class: "hx-text" }, part.text || ""));
        continue;
      }
      const node = renderPart(part);
      if (node) {
        body.append(node);
        paragraph = null; // a step boundary (no visible part) does not break the text
      }
    }
    if (context.isLive && !(message.parts || []).some((p) => p.type === "text")) {
      body.append(el("span", { class: "hx-typing", "aria-label": gettext("Writing") }, el("i"), el("i"), el("i")));
    }
    const node = el(
      "article",
      {
        class: classes.join(" "),
        "data-message-id": message.id,
        "data-role": message.role,
        "data-partial": partial ? helix.status || "partial" : null,
      },
      el("div", { class: "hx-avatar", "aria-hidden": "true" }, message.role === "user" ? gettext("You") : gettext("AI")),
      el("div", { class: "hx-content" }, body),
    );
    const content = node.querySelector(".hx-content");
    // While a Continue writes into a partial answer, it is being written, not interrupted.
    if (partial && !context.isLive) content.append(partialNotice(message, helix, context));
    else if (message.role === "assistant" && context.isLast && context.idle) {
      content.append(
        el(
          "div",
          { class: "hx-actions" },
          confirmable("regenerate", message.id, "hx-chip", gettext("Regenerate"), gettext("Replace this answer with a new one"), () =>
            chat.regenerate(message.id),
          ),
        ),
      );
    }
    if (context.isPending) content.append(unsentNotice(context.pendingError, context.view));
    return node;
  }

  function renderPart(part) {
    if (part.type === "reasoning") {
      return el("details", { class: "hx-reasoning" }, el("summary", {}, gettext("Reasoning")), el("div", {}, part.text || ""));
    }
    if (part.type === "dynamic-tool" || part.type?.startsWith("tool-")) {
      const name = part.toolName || part.type.slice(5);
      const state = {
        "input-streaming": gettext("preparing"),
        "input-available": gettext("running"),
        "approval-requested": gettext("awaiting approval"),
        "output-available": gettext("done"),
        "output-error": gettext("failed"),
        "output-denied": gettext("denied"),
      }[part.state];
      return el(
        "div",
        { class: `hx-tool is-${part.state}` },
        el("span", { class: "hx-tool-name" }, name),
        el("span", { class: "hx-tool-state" }, state || part.state || ""),
      );
    }
    return null;
  }

  // The recovery state of a run, from GET .../recovery (null while unknown).
  function recoveryOf(view, runId) {
    return view.recovery && view.recovery.runId === runId ? view.recovery : null;
  }

  function partialNotice(message, helix, context) {
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
      check && check.outcome !== "completed" ? el("div", { "data-testid": "status-check", "data-outcome": check.outcome }, statusCheckText(check.outcome)) : null,
      actionable ? recoveryActions(message.id, helix.runId, recovery) : null,
    );
  }

  // Regenerate, Continue, Keep, Discard, Check status: each shown only when the server says it applies
  // (until it answered, Regenerate only), each named for what it does.
  function recoveryActions(messageId, runId, recovery) {
    const available = (name) => (recovery ? recovery.actions?.[name]?.available : name === "regenerate");
    const chip = (name, label, title, onclick, cls = "hx-chip") =>
      available(name) ? el("button", { type: "button", class: cls, title, onclick, "data-action": name }, label) : null;
    const confirmed = (name, label, title, onclick, cls) =>
      available(name) ? confirmable(name, runId, cls, label, title, onclick) : null;
    // While one action asks to be confirmed, its question and its two answers are all the row shows.
    const asking = confirming?.key.endsWith(`:${runId}`) ? confirming.key.split(":")[0] : null;
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

  // A button whose first click asks "are you sure?" in place; "Yes, <action>" acts, "No, go back"
  // leaves everything as it was.
  function confirmable(name, id, cls, label, title, act) {
    const key = `${name}:${id}`;
    if (confirming?.key !== key) {
      const ask = () => {
        confirming = { key };
        rendered.clear();
        scheduleRender();
      };
      return el("button", { type: "button", class: cls, title, onclick: ask, "data-action": name }, label);
    }
    const [question, yes] = CONFIRM_TEXT()[name];
    const done = () => {
      confirming = null;
      rendered.clear();
      scheduleRender();
    };
    return el(
      "span",
      { class: "hx-confirm", role: "group", "data-testid": "confirm", "data-action": name },
      el("span", {}, question, " "),
      el("button", { type: "button", class: "hx-chip is-danger", "data-confirm": "yes", onclick: () => { done(); act(); } }, yes),
      el("button", { type: "button", class: "hx-chip", "data-confirm": "no", onclick: done }, gettext("No, go back")),
    );
  }

  // A line under the composer: why a send did nothing (an answer is being written).
  function renderHint(view) {
    let node = root.querySelector("[data-testid=composer-hint]");
    if (!view.isBusy) hint = "";
    if (!hint) {
      node?.remove();
      return;
    }
    if (!node) {
      node = el("p", { class: "hx-composer-hint", role: "status", "data-testid": "composer-hint" });
      ui.composer.append(node);
    }
    node.textContent = hint;
  }

  function unsentNotice(error, view) {
    if (!error) return el("div", { class: "hx-unsent" }, gettext("Sending…"));
    return el(
      "div",
      { class: "hx-unsent", role: "alert", "data-testid": "send-error", "data-code": error.code },
      el("span", {}, interpolate(gettext("Not sent. %(reason)s"), { reason: describeError(error) })),
      el(
        "div",
        { class: "hx-actions" },
        error.retryable !== false
          ? el("button", { type: "button", class: "hx-chip is-primary", onclick: () => chat.retry(), disabled: view.isBusy ? true : null }, gettext("Retry"))
          : null,
        el(
          "button",
          {
            type: "button",
            class: "hx-chip",
            onclick: () => {
              ui.input.value = textOf(view.pending.message);
              chat.pending = null;
              chat.setStatus("ready");
              ui.input.focus();
            },
          },
          gettext("Edit"),
        ),
      ),
    );
  }

  // A notice for a run that ended without a message to mark (stopped before any text,
  // or a failed snapshot status with no partial row).
  function runNotice(view, lastAssistant) {
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
            el("button", { type: "button", class: "hx-chip is-primary", "data-action": "regenerate", onclick: () => chat.regenerate(null) }, gettext("Regenerate")),
          )
        : null,
    );
  }

  function errorBanner(view) {
    if (view.status !== "error" || !view.error || view.error.kind === "send") return null;
    return el(
      "div",
      { class: "hx-banner", role: "alert", "data-testid": "error-banner", "data-code": view.error.code },
      el("span", {}, describeError(view.error)),
      view.error.retryable !== false
        ? el("button", { type: "button", class: "hx-chip is-primary", onclick: () => chat.retry() }, gettext("Retry"))
        : null,
    );
  }

  function snapshotErrorState(error) {
    return el(
      "div",
      { class: "hx-error-state", role: "alert", "data-testid": "snapshot-error", "data-code": error.code },
      el("h2", {}, gettext("This conversation could not be loaded")),
      el("p", {}, interpolate(gettext("%(reason)s Your messages are safe on the server; nothing was lost."), { reason: describeError(error) })),
      el("p", { class: "hx-muted" }, interpolate(gettext("Error code: %(code)s"), { code: error.code })),
      el("button", { type: "button", class: "hx-button", onclick: () => chat.retry() }, gettext("Retry")),
    );
  }

  function emptyState() {
    return el(
      "div",
      { class: "hx-empty" },
      el("h2", {}, gettext("Start a conversation")),
      el("p", {}, gettext("Answers are stored as they stream. Reload the page or lose the network mid-answer: it picks up where it was.")),
    );
  }

  // --- wiring ---------------------------------------------------------------------------

  function open(sessionId, { push = false } = {}) {
    if (chat) chat.dispose();
    rendered.clear();
    const isNew = minted.has(sessionId) && !sessions.some((s) => s.id === sessionId);
    chat = new HelixChat({ ...(options.client || {}), sessionId, routes, headers, isNew });
    // Count the client's reconnect attempts (each one reports "reconnecting" again).
    const setStatus = chat.setStatus.bind(chat);
    chat.setStatus = (status, error) => {
      reconnects = status === "reconnecting" ? reconnects + 1 : 0;
      setStatus(status, error);
    };
    reconnects = 0;
    confirming = null;
    hint = "";
    let wasBusy = false;
    chat.addEventListener("change", () => {
      scheduleRender();
      const busy = chat.view().isBusy;
      if (wasBusy && !busy) loadSessions();
      wasBusy = busy;
    });
    if (push) history.pushState({ sessionId }, "", options.chatUrl(sessionId));
    root.dataset.sessionId = sessionId;
    renderSessions();
    render();
    chat.load();
    return chat;
  }

  // A new conversation is created with a title (its first message) before its first send.
  async function ensureSession(text) {
    if (sessions.some((s) => s.id === chat.sessionId) || chat.messages.length) return;
    try {
      await fetch(routes.sessions(), {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json", ...headers() },
        body: JSON.stringify({ id: chat.sessionId, title: text.length > 60 ? `${text.slice(0, 57)}…` : text }),
        credentials: "same-origin",
      });
    } catch {
      // The chat route creates the session on its own; only the title is missing then.
    }
  }

  ui.composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = ui.input.value.trim();
    if (text && chat.view().isBusy) {
      hint = BUSY_HINT(); // the text stays in the composer, to send once the answer is done
      renderHint(chat.view());
      return;
    }
    if (!text) return;
    ui.input.value = "";
    autosize();
    minted.delete(chat.sessionId);
    await ensureSession(text);
    await chat.send(text);
  });
  ui.input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      ui.composer.requestSubmit();
    }
  });
  function autosize() {
    ui.input.style.height = "auto";
    ui.input.style.height = `${Math.min(ui.input.scrollHeight, 220)}px`;
  }
  ui.input.addEventListener("input", autosize);
  ui.stop.addEventListener("click", () => chat.stop());
  q("new-chat")?.addEventListener("click", () => {
    const sessionId = newMessageId().replace("msg_", "s_");
    minted.add(sessionId);
    open(sessionId, { push: true });
    ui.input.focus();
  });
  window.addEventListener("popstate", (event) => {
    if (event.state?.sessionId) open(event.state.sessionId);
  });

  history.replaceState({ sessionId: options.sessionId }, "", options.chatUrl(options.sessionId));
  open(options.sessionId);
  loadSessions();
  return { open, get chat() { return chat; }, reloadSessions: loadSessions };
}
