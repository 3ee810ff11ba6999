// The chat page's sidebar: the list of conversations, and the menu that shows the sidebar
// on narrow screens (where it is hidden behind a menu button).
//
// The menu button (`[data-hx=menu]`, aria-controls = the sidebar's id) opens the sidebar
// over the page and moves focus into it; Escape, the backdrop, the button again, or
// choosing a conversation / New chat close it, and focus returns to the button.

import { sessionLabel } from "./chat-texts.js";
import { textOf } from "./client.js";
import { el } from "./dom.js";
import { gettext } from "./i18n.js";

/** Return the title of `chat` from its first user message (up to 60 characters), "" without one. */
export function chatTitle(chat) {
  const first = chat?.messages.find((m) => m.role === "user");
  const text = first ? textOf(first).trim() : "";
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}

/**
 * Return the sessions list of `node`: { load(), render(), sessions, listedTitle }.
 * `page`: { chat, open(id, {push}) }; `routes.sessions()`: the list's URL; `chatUrl(id)`: a page URL.
 * `onLoaded()` runs after each load.
 */
export function sessionsList(node, page, { routes, chatUrl, onLoaded }) {
  const list = {
    sessions: [],
    error: null,
    // The current conversation's name as the header shows it (one name per conversation).
    listedTitle: "",
    async load() {
      try {
        const response = await fetch(routes.sessions(), { headers: { Accept: "application/json" }, cache: "no-store" });
        if (!response.ok) throw new Error(String(response.status));
        const body = await response.json();
        list.sessions = Array.isArray(body) ? body : body.results || body.sessions || [];
        list.error = null;
      } catch {
        list.error = gettext("Conversations could not be loaded.");
      }
      list.render();
      onLoaded?.();
    },
    render() {
      const chat = page.chat;
      const current = chat?.sessionId;
      const items = list.sessions.map((session) =>
        el(
          "li",
          {},
          el(
            "a",
            {
              href: chatUrl(session.id),
              class: session.id === current ? "hx-session is-current" : "hx-session",
              "aria-current": session.id === current ? "page" : null,
              "data-session-id": session.id,
              onclick: (event) => {
                event.preventDefault();
                page.open(session.id, { push: true });
              },
            },
            el("span", { class: "hx-session-title" }, session.id === current && list.listedTitle ? list.listedTitle : sessionLabel(session)),
          ),
        ),
      );
      if (current && !list.sessions.some((s) => s.id === current)) {
        const title = chatTitle(chat) || (chat?.view().loaded && !chat.messages.length ? gettext("New chat") : gettext("Conversation"));
        items.unshift(el("li", {}, el("span", { class: "hx-session is-current", "data-testid": "current-session" }, title)));
      }
      node.replaceChildren(el("ul", {}, items));
      if (list.error) {
        node.append(
          el(
            "p",
            { class: "hx-sessions-error" },
            list.error,
            " ",
            el("button", { type: "button", class: "hx-link", onclick: () => list.load() }, gettext("Retry")),
          ),
        );
      }
    },
  };
  return list;
}

/**
 * Wire the menu `button` that shows `sidebar` on narrow screens; return { close() }.
 * Open: `root` gets the class `is-menu-open`, the button aria-expanded="true".
 */
export function sidebarMenu(root, button, sidebar) {
  if (!button || !sidebar) return { close() {} };
  const backdrop = el("div", { class: "hx-backdrop", "data-testid": "menu-backdrop", "aria-hidden": "true" });
  root.append(backdrop);
  const isOpen = () => root.classList.contains("is-menu-open");
  const name = (open) => button.setAttribute("aria-label", open ? gettext("Close the menu") : gettext("Open the menu"));
  name(false);
  function set(open, { restoreFocus = true } = {}) {
    if (open === isOpen()) return;
    root.classList.toggle("is-menu-open", open);
    button.setAttribute("aria-expanded", open ? "true" : "false");
    name(open);
    if (open) sidebar.querySelector("button, a[href], [tabindex='0']")?.focus();
    else if (restoreFocus && sidebar.contains(document.activeElement)) button.focus();
  }
  button.addEventListener("click", () => set(!isOpen()));
  backdrop.addEventListener("click", () => set(false));
  root.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && isOpen()) {
      event.preventDefault();
      set(false);
      button.focus();
    }
  });
  return { close: (options) => set(false, options) };
}
