// The React entry of the AI SDK kit ("helix-ai-sdk/react"): everything of aisdk.js, plus
// `helixTransport` bound to `ai`'s DefaultChatTransport and the `useHelixChat` hook.
// Needs a bundler (it imports `react`, `ai` and `@ai-sdk/react`); works with ai@6 +
// @ai-sdk/react 3.x and ai@7 + @ai-sdk/react 4.x.
//
//   const transport = useMemo(() => helixTransport({ sessionId, target }), [sessionId, target]);
//   const chat = useHelixChat({ id: sessionId, transport, messages: target.messages,
//                               resume: target.resume, resync: { snapshot } });

import { Chat, useChat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  helixTransport as coreHelixTransport,
  isReattachable,
  isResyncTrigger,
  lastUserMessageId,
  newMessageId,
  parseHelixChatError,
  queuedMessagesOf,
  reanchorChat,
  reattachDelay,
  waitForReattach,
} from "./aisdk.js";

export * from "./aisdk.js";

/** A user UIMessage from a text or a message (a message without an id gets one). */
function asUserMessage(input) {
  if (typeof input === "string") return { id: newMessageId(), role: "user", parts: [{ type: "text", text: input }] };
  return { role: "user", ...input, id: input.id || newMessageId() };
}

/** `helixTransport` of aisdk.js with `ai`'s DefaultChatTransport. */
export function helixTransport(options) {
  return coreHelixTransport({ DefaultChatTransport, ...options });
}

const BUSY = new Set(["submitted", "streaming"]);

function untilIdle(chat, timeoutMs) {
  return new Promise((resolve) => {
    const started = Date.now();
    const check = () => {
      if (!BUSY.has(chat.status)) resolve(true);
      else if (Date.now() - started > timeoutMs) resolve(false);
      else setTimeout(check, 50);
    };
    check();
  });
}

/** Whether a tool call of `chat`'s messages still waits for its output (no result, error or denial). */
function isPending(chat, toolCallId) {
  for (const message of chat.messages) {
    const part = message.parts.find((p) => p.toolCallId === toolCallId);
    if (part) return part.state === "input-available";
  }
  return false;
}

/**
 * `onToolCall` / `onData` that keep replayed tool calls from running again (002, "Replayed
 * tools and approvals"): a call inside a `data-helix-replay` begin/end pair is history; one
 * the replay leaves without output (still awaiting the browser) is dispatched once, after
 * the replay ends. The app's own callbacks are read from `callbacks.current`.
 */
function replayAwareCallbacks(callbacks, getChat, onPart) {
  let replay = null;
  return {
    onData: (part) => {
      onPart(part);
      if (part.type === "data-helix-replay" && part.data?.phase === "begin") replay = [];
      if (part.type === "data-helix-replay" && part.data?.phase === "end" && replay) {
        const held = replay;
        replay = null;
        setTimeout(() => {
          for (const call of held) if (isPending(getChat(), call.toolCall.toolCallId)) callbacks.current.onToolCall?.(call);
        }, 0);
      }
      return callbacks.current.onData?.(part);
    },
    onToolCall: (call) => {
      if (replay) {
        replay.push(call);
        return undefined;
      }
      return callbacks.current.onToolCall?.(call);
    },
  };
}

/**
 * `useChat` on a chat route, exact through reloads and drops.
 *
 * It builds the `Chat` itself and hands it to `useChat({ chat })`: `@ai-sdk/react` 3.x
 * wraps a transport given to `useChat` and drops its `resumeStreamIsReplay`, so a replayed
 * `start` would not reset a half-built message (the answer doubled after a drop). With
 * `resync`, a response that failed as a drop (what the kit's transport recorded, never the
 * error's text) re-attaches on its own: after a bounded, jittered backoff (or the browser's
 * `online` event, never shorter than `Retry-After`) it re-anchors on the snapshot and
 * resumes with the replay prefix, but only when the snapshot holds the turn (the user
 * message the chat sent last): a send that never reached the server stays with its error
 * for `retry()`. At most `reattach.maxAttempts` (5) in a row; a resume
 * that streams resets the count. A resync trigger in the stream (`isResyncTrigger`, as
 * HelixChat: `data-attempt-superseded` after a provider retry, `data-stream-resync`,
 * `data-tool-output-elsewhere`) ends the response and re-anchors on the snapshot at once,
 * so a superseded attempt's text never stays on screen. A replayed tool call never reaches `onToolCall` again,
 * except a client tool still awaiting its output, once, after the replay.
 *
 * @param {object} options  useChat / Chat options, with `transport` from `helixTransport`,
 *   `resync` ({snapshotUrl?}) and `reattach` ({maxAttempts?, baseDelayMs?, maxDelayMs?})
 * @returns useChat's result with `stop()` (cancels the run on the server, then shows the
 *   snapshot), `checkStatus(runId?)` (asks the provider about the run's durable operation,
 *   then shows the snapshot: a finished answer complete; resolves to `{outcome, ...}`,
 *   throws HelixRequestError when refused), `continueRun(runId?)`, `keep(runId?)`,
 *   `discard(runId?)`, `regenerateRun(runId?)` (the recovery actions of an interrupted run,
 *   recovery.js, then the snapshot; same result and errors as checkStatus),
 *   `recovery(runId?)` (which of them apply: `{runId, status, recoveryAction, actions}`),
 *   `queue(textOrMessage)` (multitask enqueue: the message starts after the live answer;
 *   resolves to queueMessage's answer), `queued` (the messages waiting, with their
 *   `queuedMessageId` and `position`), `removeQueued(queuedMessageId)`,
 *   `interrupt(textOrMessage)` (stops the live answer for the message, its partial kept),
 *   `retry()` (re-sends the failed user message as
 *   itself, so under its request key; an answer that failed is regenerated),
 *   `helixError` (the typed body of `error`) and `resyncError` (the last failed re-anchor)
 */
export function useHelixChat({ id, transport, messages, resume = false, resync, reattach = {}, ...options }) {
  const callbacks = useRef(options);
  callbacks.current = options;
  const onPart = useRef(null);
  const instance = useMemo(
    () =>
      new Chat({
        id,
        messages,
        transport,
        ...options,
        ...replayAwareCallbacks(callbacks, () => instance, (part) => onPart.current?.(part)),
      }),
    [id, transport], // eslint-disable-line react-hooks/exhaustive-deps
  );
  const seenTriggers = useMemo(() => new Set(), [instance]);
  const lastSnapshot = useRef(null);
  const chat = useChat({ chat: instance, resume });
  const helix = transport.helix;
  const snapshotUrl = resync?.snapshotUrl ?? helix?.snapshotUrl;
  const maxAttempts = reattach.maxAttempts ?? 5;
  const [resyncError, setResyncError] = useState(null);
  const streak = useRef(0);
  const latest = useRef(chat);
  latest.current = chat;

  const [queued, setQueued] = useState([]);

  const reanchor = useCallback(
    async (signal, turn) => {
      const snapshot = await reanchorChat(latest.current, { snapshotUrl, signal, state: helix?.state, turn });
      if (snapshot) {
        lastSnapshot.current = snapshot;
        setQueued(queuedMessagesOf(snapshot));
      }
      return snapshot;
    },
    [snapshotUrl, helix],
  );

  // A resync trigger (HelixChat's, isResyncTrigger: a superseded attempt, a resync, a tool
  // result elsewhere) means the message on screen is not the run's truth: the superseded
  // attempt's parts stay in it and the winning attempt's follow. Like HelixChat, end this
  // response (the run goes on) and re-anchor on the snapshot, whose replay prefix rebuilds
  // the in-flight message from what the run kept. Deferred: onData runs inside the chat's
  // message job, which stop() waits for.
  onPart.current = (part) => {
    if (!snapshotUrl || !isResyncTrigger(part, seenTriggers, lastSnapshot.current)) return;
    setTimeout(async () => {
      await instance.stop();
      try {
        await reanchor();
        setResyncError(null);
      } catch (error) {
        setResyncError(error);
      }
    }, 0);
  };

  useEffect(() => {
    if (chat.status === "streaming" || chat.status === "ready") streak.current = 0;
  }, [chat.status]);

  useEffect(() => {
    if (!resync || chat.status !== "error" || !isReattachable(helix?.state)) return undefined;
    const controller = new AbortController();
    (async () => {
      while (streak.current < maxAttempts) {
        streak.current += 1;
        const retryAfterSeconds = helix.state.failure?.retryAfterSeconds ?? 0;
        try {
          const delay = reattachDelay(streak.current, { ...reattach, retryAfterSeconds });
          await waitForReattach(delay, { signal: controller.signal });
          // Only a turn the server holds is re-anchored: a send that never reached it stays
          // on screen with its error, for retry() to re-send.
          await reanchor(controller.signal, lastUserMessageId(latest.current.messages));
          setResyncError(null);
          return;
        } catch (error) {
          if (controller.signal.aborted) return;
          setResyncError(error);
        }
      }
    })();
    return () => controller.abort();
  }, [chat.status, chat.error]); // eslint-disable-line react-hooks/exhaustive-deps

  const stop = useCallback(async () => {
    await helix.stop();
    // The server ends the stream once the cancel landed; closing it ourselves is the fallback.
    if (!(await untilIdle(instance, 5000))) await instance.stop();
    if (resync) await reanchor().catch(setResyncError);
  }, [instance, helix, resync, reanchor]);

  // A recovery action on the server, then the snapshot: its answer, or the run it started, live.
  const recover = useCallback(
    async (act, runId) => {
      const answer = await act(runId);
      if (snapshotUrl) await reanchor().catch(setResyncError);
      return answer;
    },
    [snapshotUrl, reanchor],
  );
  const checkStatus = useCallback((runId) => recover(helix.checkStatus, runId), [helix, recover]);
  const continueRun = useCallback((runId) => recover(helix.continueRun, runId), [helix, recover]);
  const keep = useCallback((runId) => recover(helix.keep, runId), [helix, recover]);
  const discard = useCallback((runId) => recover(helix.discard, runId), [helix, recover]);
  const regenerateRun = useCallback((runId) => recover(helix.regenerate, runId), [helix, recover]);

  // Messages typed while an answer is live (multitask). `queue` stores one to start after the
  // answer (202): it shows in `queued` until it starts; when the answer ends the server
  // starts it, and the chat re-anchors on the snapshot to show its turn. `interrupt` stops
  // the live answer for the new message (its partial kept) and streams the new answer.
  const queue = useCallback(
    async (input) => {
      const message = asUserMessage(input);
      const answer = await helix.queue(message);
      if (answer.queued) setQueued((list) => [...list.filter((m) => m.id !== message.id), { ...message, ...answer.queued }]);
      else if (snapshotUrl) await reanchor().catch(setResyncError);
      return answer;
    },
    [helix, snapshotUrl, reanchor],
  );
  const removeQueued = useCallback(
    async (queuedMessageId) => {
      await helix.removeQueued(queuedMessageId);
      setQueued((list) => list.filter((m) => m.queuedMessageId !== queuedMessageId));
      return true;
    },
    [helix],
  );
  const interrupt = useCallback(
    async (input) => {
      await instance.stop(); // this response only: the server stops the run for the new message
      await latest.current.sendMessage(asUserMessage(input), { body: { multitask: "interrupt" } });
      if (snapshotUrl) await reanchor().catch(setResyncError); // the interrupted answer as the server kept it
    },
    [instance, snapshotUrl, reanchor],
  );
  const wasBusy = useRef(false);
  useEffect(() => {
    const busy = BUSY.has(chat.status);
    if (wasBusy.current && !busy && queued.length && snapshotUrl) {
      // The answer ended: the server starts the next queued message; show its turn live.
      const timer = setTimeout(() => reanchor().catch(setResyncError), 250);
      wasBusy.current = busy;
      return () => clearTimeout(timer);
    }
    wasBusy.current = busy;
    return undefined;
  }, [chat.status]); // eslint-disable-line react-hooks/exhaustive-deps

  // A failed send (the chat ends with its user message) is sent again as itself: the same
  // message id, so the same request key, and a send that did reach the server is not doubled.
  const retry = useCallback(() => {
    const current = latest.current;
    const last = current.messages.at(-1);
    if (last?.role !== "user") return current.regenerate();
    current.setMessages(current.messages.slice(0, -1));
    return current.sendMessage({ id: last.id, role: "user", parts: last.parts, metadata: last.metadata });
  }, []);

  return {
    ...chat,
    stop,
    checkStatus,
    continueRun,
    keep,
    discard,
    regenerateRun,
    recovery: helix.recovery,
    queue,
    queued,
    removeQueued,
    interrupt,
    retry,
    resyncError,
    helixError: parseHelixChatError(chat.error),
  };
}
