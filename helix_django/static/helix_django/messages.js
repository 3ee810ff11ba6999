// One message of the conversation as the chat page shows it.
//
// An assistant's text is Markdown, rendered to sanitised HTML (markdown.js) each time the
// message is drawn: while it streams the page draws at most once per animation frame, so a
// growing answer is parsed once per frame, never once per chunk. Consecutive text parts
// (a Continue writes a new part of the same answer) are one Markdown text: the answer goes
// on in the same block, mid-sentence if that is where it stopped. A user's text is shown
// as typed (plain text, never parsed).
//
// `page`: the shared state of recovery-card.js, plus `ui.input` (the composer's textarea).

import { describeError, isFollowedOutcome } from "./chat-texts.js";
import { textOf } from "./client.js";
import { copyButton } from "./copy.js";
import { el } from "./dom.js";
import { gettext, interpolate } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { confirmable, partialNotice, recoveryOf, statusCheckLine } from "./recovery-card.js";

/**
 * Return the element of `message`.
 * `context`: { isLive, isPending, pendingError, isLast (the last assistant message), idle, view }.
 */
/** A message waiting for the live answer to end (multitask enqueue), with its Remove. */
export function renderQueuedMessage(page, queued) {
  const remove = () => page.chat.removeQueued(queued.queuedMessageId);
  return el(
    "article",
    { class: "hx-message hx-user hx-queued", "data-role": "queued", "data-testid": "queued-message" },
    el("div", { class: "hx-content" }, el("div", { class: "hx-bubble" }, textOf(queued))),
    el(
      "p",
      { class: "hx-queued-note" },
      gettext("Waits for the answer above to finish."),
      " ",
      el("button", { type: "button", class: "hx-link", "data-testid": "queued-remove", onclick: remove }, gettext("Remove")),
    ),
  );
}

export function renderMessage(page, message, context) {
  const helix = message.metadata?.helix || {};
  const isAssistant = message.role === "assistant";
  const partial = isAssistant && helix.partial;
  const classes = ["hx-message", `hx-${message.role}`];
  if (context.isLive) classes.push("is-streaming");
  if (partial) classes.push("is-partial");
  if (partial && recoveryOf(context.view, helix.runId)?.recoveryAction === "keep_partial") classes.push("is-kept");
  if (context.isPending) classes.push("is-unsent");
  const body = el("div", { class: "hx-bubble" }, ...renderParts(message.parts || [], isAssistant));
  if (context.isLive && !(message.parts || []).some((p) => p.type === "text")) {
    body.append(el("span", { class: "hx-typing", "aria-label": gettext("Writing") }, el("i"), el("i"), el("i")));
  }
  const content = el("div", { class: "hx-content" }, body);
  const node = el(
    "article",
    {
      class: classes.join(" "),
      "data-message-id": message.id,
      "data-role": message.role,
      "data-partial": partial ? helix.status || "partial" : null,
    },
    el("div", { class: "hx-avatar", "aria-hidden": "true" }, message.role === "user" ? gettext("You") : gettext("AI")),
    content,
  );
  const check = context.view.statusCheck;
  if (isAssistant && context.isLive && check && check.runId === helix.runId && isFollowedOutcome(check.outcome)) {
    // A Check status found the model still writing and the server went on with it: say so above what follows.
    content.prepend(statusCheckLine(check, "hx-status-check"));
  }
  const text = isAssistant ? textOf(message) : "";
  const tools = [];
  if (isAssistant && !context.isLive && text) tools.push(...copyButton(() => textOf(message)));
  // While a Continue writes into a partial answer, it is being written, not interrupted.
  if (partial && !context.isLive) {
    if (tools.length) content.append(el("div", { class: "hx-actions hx-answer-tools" }, tools));
    content.append(partialNotice(page, message, helix, context));
  } else {
    if (isAssistant && context.isLast && context.idle) {
      tools.unshift(
        confirmable(page, "regenerate", message.id, "hx-chip", gettext("Regenerate"), gettext("Replace this answer with a new one"), () =>
          page.chat.regenerate(message.id),
        ),
      );
    }
    if (tools.length) content.append(el("div", { class: "hx-actions hx-answer-tools" }, tools));
  }
  if (context.isPending) content.append(unsentNotice(page, context.pendingError, context.view));
  return node;
}

function renderParts(parts, isAssistant) {
  const nodes = [];
  let run = []; // the texts of consecutive text parts: one block
  const flush = () => {
    if (!run.length) return;
    nodes.push(isAssistant ? markdownBlock(run.join("")) : plainBlock(run));
    run = [];
  };
  for (const part of parts) {
    if (part.type === "text") {
      run.push(part.text || "");
      continue;
    }
    const node = renderPart(part);
    if (node) {
      flush();
      nodes.push(node);
    }
    // a step boundary (no visible part) does not break the text
  }
  flush();
  return nodes;
}

function markdownBlock(text) {
  const block = el("div", { class: "hx-paragraph hx-markdown" });
  block.innerHTML = renderMarkdown(text); // sanitised by markdown.js
  return block;
}

function plainBlock(texts) {
  return el("div", { class: "hx-paragraph" }, texts.map((text) => el("span", { class: "hx-text" }, text)));
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

function unsentNotice(page, error, view) {
  const chat = page.chat;
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
            page.ui.input.value = textOf(view.pending.message);
            chat.pending = null;
            chat.setStatus("ready");
            page.ui.input.focus();
          },
        },
        gettext("Edit"),
      ),
    ),
  );
}
