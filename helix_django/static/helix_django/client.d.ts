// Type declarations of "helix-ai-sdk/client" (client.js): HelixChat, the plain client of
// the chat route without the AI SDK (002, "The canonical client").
import type {
  HelixErrorBody,
  HelixMessage,
  HelixRoutes,
  HelixSnapshot,
  MultitaskStrategy,
  QueuedMessage,
  RecoveryInventory,
  RecoveryResult,
} from "./aisdk.js";

export {
  HelixRequestError,
  RESYNC_TRIGGERS,
  SnapshotUnavailableError,
  isResyncTrigger,
  newMessageId,
  newRequestKey,
  resumeHeaders,
  routesFor,
  snapshotResumeOptions,
  triggerIdentity,
} from "./aisdk.js";

export function fetchSnapshotWithRetry(
  url: string,
  options?: { fetch?: typeof fetch; signal?: AbortSignal; headers?: Record<string, string> },
): Promise<HelixSnapshot | null>;
export function parseError(value: unknown): HelixErrorBody | undefined;
export function gettext(msgid: string): string;
export function interpolate(format: string, values: unknown[] | Record<string, unknown>): string;
export function setCatalog(json: { catalog?: Record<string, string | string[]> } | null): void;
export function readEventStream(
  body: ReadableStream<Uint8Array>,
  options?: { onBytes?: () => void },
): AsyncGenerator<{ id: string | null; event: string; data: string }>;
export function textOf(message: HelixMessage): string;
export class MessageAccumulator {
  constructor(messageId: string, seed?: { parts?: object[]; metadata?: object });
  message: HelixMessage;
  readonly parts: HelixMessage["parts"];
}

export type HelixChatStatus = "loading" | "ready" | "submitted" | "streaming" | "reconnecting" | "error";

export interface HelixChatError extends HelixErrorBody {
  kind: "snapshot" | "send" | "stream" | "action";
  status: number;
}

export interface HelixChatView {
  messages: HelixMessage[];
  status: HelixChatStatus;
  error: HelixChatError | null;
  /** A user message the server has not accepted (yet), with the request key it is sent under. */
  pending: { message: HelixMessage; key: string; error?: HelixErrorBody | null } | null;
  snapshot: HelixSnapshot | null;
  runId: string | null;
  runStatus: string | null;
  cursor: number;
  liveMessageId: string | null;
  loaded: boolean;
  recovery: RecoveryInventory | null;
  statusCheck: { runId: string; outcome: string } | null;
  /** Messages waiting for the live answer to end (multitask enqueue), from the snapshot. */
  queued: QueuedMessage[];
  isBusy: boolean;
}

export interface HelixChatOptions {
  sessionId: string;
  baseUrl?: string;
  routes?: HelixRoutes;
  fetch?: typeof fetch;
  headers?: Record<string, string> | (() => Record<string, string>);
  reattach?: { maxAttempts?: number; baseDelayMs?: number; maxDelayMs?: number };
  snapshotBackoffMs?: number[];
  /** No byte for this long (ms) is a drop. */
  stallMs?: number;
  /** A chat id the page just minted: no snapshot is asked for before its first send. */
  isNew?: boolean;
}

/** One chat session in the browser; emits "change" whenever `view()` changes. */
export class HelixChat extends EventTarget {
  constructor(options: HelixChatOptions);
  readonly sessionId: string;
  readonly messages: HelixMessage[];
  view(): HelixChatView;
  dispose(): void;
  load(): Promise<void>;
  /** `multitask`: what the send does while an answer is being written (default: the agent's setting). */
  send(text: string, options?: { multitask?: MultitaskStrategy }): Promise<void>;
  /** Take a queued message back before it starts; false (and an `action` error) when refused. */
  removeQueued(queuedMessageId: string): Promise<boolean>;
  retry(): Promise<void>;
  stop(): Promise<void>;
  regenerate(messageId?: string | null): Promise<void>;
  continueRun(runId: string): Promise<void>;
  keep(runId: string): Promise<void>;
  discard(runId: string): Promise<void>;
  checkStatus(runId: string): Promise<RecoveryResult | null>;
}
