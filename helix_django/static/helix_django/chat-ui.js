// A chat page on top of HelixChat: sessions sidebar, conversation, composer, recovery actions.
//
// mountChat(root, options) expects the markup of templates/helix_django/chat.html:
//   [data-hx="sessions"] [data-hx="new-chat"] [data-hx="title"] [data-hx="connection"]
//   [data-hx="conversation"] [data-hx="composer"] [data-hx="input"] [data-hx="send"] [data-hx="stop"]
//   [data-hx="menu"] (the menu button of narrow screens) [data-hx="sidebar"]
// options: { sessionId, baseUrl, chatUrl(id) -> page URL of a session, csrfToken,
//            newSession: true when no session `sessionId` exists yet (a chat id just minted),
//            client: extra HelixChat options (reattach, stallMs, snapshotBackoffMs) }
// A chat id minted here or by the server (newSession) is opened without a snapshot request
// until its first send creates the session.
//
// The parts: messages.js draws a message (Markdown answers, Copy), recovery-card.js the
// card of a partial answer, sidebar.js the conversations and the narrow-screen menu,
// chat-texts.js the page's words. This module wires them: one render per animation frame,
// each message redrawn only when what it shows changed.

import { busyHint, describeError, sessionLabel } from "./chat-texts.js";
import { HelixChat, newMessageId, routesFor } from "./client.js";
import { el } from "./dom.js";
import { gettext, interpolate } from "./i18n.js";
import { renderMessage, renderQueuedMessage } from "./messages.js";
import { runNotice } from "./recovery-card.js";
import { chatTitle, sessionsList, sidebarMenu } from "./sidebar.js";

/** Mount the chat page on `root`; returns a controller with `open(sessionId)`. */
export function mountChat(root, options) {
  const q = (name) => root.querySelector(`[data-hx="${name}"]`);
  const routes = options.routes || routesFor(options.baseUrl || "/helix/api");
  const csrf = () => options.csrfToken || document.cookie.match(/(?:^|; )csrftoken=([^;]+)/)?.[1] || "";
  const headers = () => ({ "X-CSRFToken": csrf() });
  const ui = {
    conversation: q("conversation"),
    title: q("title"),
    connection: q("connection"),
    input: q("input"),
    send: q("send"),
    stop: q("stop"),
    composer: q("composer"),
  };
  // Chat ids minted for this page that have no session yet (nothing was sent in them).
  const minted = new Set(options.newSession ? [options.sessionId] : []);
  const rendered = new Map();
  let frame = 0;
  // Reconnect attempts of the current drop (the client reports each attempt as "reconnecting").
  let reconnects = 0;
  let hint = "";
  // What messages.js, recovery-card.js and sidebar.js share with this module.
  const page = {
    chat: null,
    ui,
    confirming: null,
    open,
    invalidate() {
      rendered.clear();
      scheduleRender();
    },
  };
  const sessions = sessionsList(q("sessions"), page, {
    routes,
    chatUrl: options.chatUrl,
    onLoaded: () => page.chat && scheduleRender(),
  });
  const menu = sidebarMenu(root, q("menu"), q("sidebar"));

  // --- conversation ---------------------------------------------------------------------

  function scheduleRender() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      render();
    });
  }

  function render() {
    const chat = page.chat;
    const view = chat.view();
    const nearBottom = ui.conversation.scrollHeight - ui.conversation.scrollTop - ui.conversation.clientHeight < 80;
    const listed = sessions.sessions.find((session) => session.id === chat.sessionId);
    // A session's own title (given when it was created, by this page or through the API) wins
    // over its first message.
    const title = listed?.title || chatTitle(chat) || (listed ? sessionLabel(listed) : view.loaded ? gettext("New chat") : gettext("Conversation"));
    ui.title.textContent = title;
    document.title = `${title} · Helix`;
    if (title !== sessions.listedTitle) {
      sessions.listedTitle = title;
      sessions.render(); // the sidebar names a new conversation as the header does
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
        context.isLast ? page.confirming?.key : null,
      ]);
      let entry = rendered.get(message.id);
      if (!entry || entry.signature !== signature) {
        const node = renderMessage(page, message, context);
        if (entry) entry.node.replaceWith(node);
        entry = { node, signature };
        rendered.set(message.id, entry);
      }
      nodes.push(entry.node);
    }
    for (const id of [...rendered.keys()]) if (!seen.has(id)) rendered.delete(id);
    for (const queued of view.queued) nodes.push(renderQueuedMessage(page, queued));
    const notice = runNotice(page, view, lastAssistant);
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
              max: page.chat.reattach?.maxAttempts ?? "?",
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
    // What the typed message may do meanwhile (multitask): wait for the answer, or stop it.
    const sendAs = (multitask) => async () => {
      const text = ui.input.value.trim();
      if (!text) return;
      ui.input.value = "";
      hint = "";
      autosize();
      renderHint(page.chat.view());
      await page.chat.send(text, { multitask });
    };
    node.replaceChildren(
      hint,
      " ",
      el("button", { type: "button", class: "hx-link", "data-testid": "queue-send", onclick: sendAs("enqueue") }, gettext("Send after this answer")),
      " · ",
      el("button", { type: "button", class: "hx-link", "data-testid": "interrupt-send", onclick: sendAs("interrupt") }, gettext("Stop it and send now")),
    );
  }

  function errorBanner(view) {
    if (view.status !== "error" || !view.error || view.error.kind === "send") return null;
    return el(
      "div",
      { class: "hx-banner", role: "alert", "data-testid": "error-banner", "data-code": view.error.code },
      el("span", {}, describeError(view.error)),
      view.error.retryable !== false
        ? el("button", { type: "button", class: "hx-chip is-primary", onclick: () => page.chat.retry() }, gettext("Retry"))
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
      el("button", { type: "button", class: "hx-button", onclick: () => page.chat.retry() }, gettext("Retry")),
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
    if (page.chat) page.chat.dispose();
    rendered.clear();
    // A conversation chosen in the narrow-screen menu: the menu closes, the composer takes focus.
    const fromMenu = root.classList.contains("is-menu-open");
    menu.close({ restoreFocus: false });
    const isNew = minted.has(sessionId) && !sessions.sessions.some((s) => s.id === sessionId);
    const chat = new HelixChat({ ...(options.client || {}), sessionId, routes, headers, isNew });
    page.chat = chat;
    // Count the client's reconnect attempts (each one reports "reconnecting" again).
    const setStatus = chat.setStatus.bind(chat);
    chat.setStatus = (status, error) => {
      reconnects = status === "reconnecting" ? reconnects + 1 : 0;
      setStatus(status, error);
    };
    reconnects = 0;
    page.confirming = null;
    hint = "";
    let wasBusy = false;
    chat.addEventListener("change", () => {
      scheduleRender();
      const busy = chat.view().isBusy;
      if (wasBusy && !busy) sessions.load();
      wasBusy = busy;
    });
    if (push) history.pushState({ sessionId }, "", options.chatUrl(sessionId));
    root.dataset.sessionId = sessionId;
    sessions.render();
    render();
    if (fromMenu) ui.input.focus();
    chat.load();
    return chat;
  }

  // A new conversation is created with a title (its first message) before its first send.
  async function ensureSession(text) {
    const chat = page.chat;
    if (sessions.sessions.some((s) => s.id === chat.sessionId) || chat.messages.length) return;
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
    if (text && page.chat.view().isBusy) {
      hint = busyHint(); // the text stays in the composer: queued, sent at once, or later
      renderHint(page.chat.view());
      return;
    }
    if (!text) return;
    ui.input.value = "";
    autosize();
    minted.delete(page.chat.sessionId);
    await ensureSession(text);
    await page.chat.send(text);
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
  ui.stop.addEventListener("click", () => page.chat.stop());
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
  sessions.load();
  return { open, get chat() { return page.chat; }, reloadSessions: () => sessions.load() };
}
