// Type declarations of "helix-ai-sdk/react" (react.js): everything of "helix-ai-sdk", plus
// `helixTransport` bound to `ai`'s DefaultChatTransport and the `useHelixChat` hook.
import type { UseChatHelpers } from "@ai-sdk/react";
import type { ChatInit, DefaultChatTransport, UIMessage } from "ai";
import type {
  HelixErrorBody,
  HelixTransportHandle,
  HelixTransportOptions,
  QueuedMessage,
  QueuedSend,
  RecoveryInventory,
  RecoveryResult,
  UserMessageInput,
} from "./aisdk.js";

export * from "./aisdk.js";

/** A DefaultChatTransport wired to the chat route, with its `helix` handle. */
export type HelixTransport<M extends UIMessage = UIMessage> = DefaultChatTransport<M> & { helix: HelixTransportHandle };

export function helixTransport<M extends UIMessage = UIMessage>(options: HelixTransportOptions): HelixTransport<M>;

export interface UseHelixChatOptions<M extends UIMessage = UIMessage> extends Omit<ChatInit<M>, "transport"> {
  id: string;
  /** From `helixTransport`. */
  transport: HelixTransport<M>;
  messages?: M[];
  /** True while the snapshot's run is live (snapshotResumeOptions). */
  resume?: boolean;
  /** Re-attach after a drop and re-anchor on the snapshot; `{}` for the defaults. */
  resync?: { snapshotUrl?: string };
  reattach?: { maxAttempts?: number; baseDelayMs?: number; maxDelayMs?: number };
}

export type UseHelixChatHelpers<M extends UIMessage = UIMessage> = UseChatHelpers<M> & {
  /** Cancel the run on the server, then show the snapshot. */
  stop(): Promise<void>;
  /** Ask the provider about an interrupted run (default: the chat's current run). */
  checkStatus(runId?: string): Promise<RecoveryResult | null>;
  continueRun(runId?: string): Promise<RecoveryResult | null>;
  keep(runId?: string): Promise<RecoveryResult | null>;
  discard(runId?: string): Promise<RecoveryResult | null>;
  regenerateRun(runId?: string): Promise<RecoveryResult | null>;
  /** Which recovery actions apply to the run, and why not. */
  recovery(runId?: string): Promise<RecoveryInventory | null>;
  /** Send a message to start after the live answer (multitask enqueue); it shows in `queued` until it starts. */
  queue(input: string | UserMessageInput): Promise<{ queued: QueuedSend } | { started: true }>;
  /** The messages waiting to start after the live answer, oldest first. */
  queued: Array<Partial<QueuedMessage> & Partial<QueuedSend>>;
  /** Take a queued message back before it starts. */
  removeQueued(queuedMessageId: string): Promise<true>;
  /** Stop the live answer for this message (its partial kept) and stream the new answer. */
  interrupt(input: string | UserMessageInput): Promise<void>;
  /** Re-send the failed user message as itself (same request key); after a failed answer, regenerate. */
  retry(): Promise<void>;
  /** The last failed re-anchor, or null. */
  resyncError: Error | null;
  /** The typed body of `error`, when it has one. */
  helixError: HelixErrorBody | undefined;
};

export function useHelixChat<M extends UIMessage = UIMessage>(options: UseHelixChatOptions<M>): UseHelixChatHelpers<M>;
