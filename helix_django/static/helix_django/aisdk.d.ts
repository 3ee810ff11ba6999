// Type declarations of "helix-ai-sdk" (aisdk.js): the AI SDK client kit for helix_django's
// chat route, its snapshot, typed errors and recovery actions (002, "The canonical client").

/** A message as the snapshot and the chat route carry it (the AI SDK's UIMessage shape). */
export interface HelixMessage {
  id: string;
  role: "system" | "user" | "assistant";
  parts: Array<{ type: string; [key: string]: unknown }>;
  metadata?: Record<string, unknown>;
}

/** `GET .../sessions/<id>/snapshot`: the committed conversation and where its stream stands. */
export interface HelixSnapshot {
  status: string;
  runId?: string | null;
  runStatus?: string | null;
  messages: HelixMessage[];
  streamSequence: number;
  resumeMessageId?: string;
  latestTruncateCheckpointId?: string | null;
  [key: string]: unknown;
}

/** The typed body of every refusal: `{error, code, retryable, cause?}`. */
export interface HelixErrorBody {
  error?: string;
  code: string;
  retryable?: boolean;
  cause?: string;
  [key: string]: unknown;
}

export class HelixRequestError extends Error {
  constructor(body: HelixErrorBody, status: number);
  body: HelixErrorBody;
  code: string;
  retryable: boolean;
  cause: string | undefined;
  /** HTTP status, 0 for a network failure. */
  status: number;
}

export class SnapshotUnavailableError extends HelixRequestError {
  reason: string | undefined;
}

export interface ResumeTarget {
  resumeFromSequence?: number;
  existingMessageId?: string;
  replayPrefix?: boolean;
}

export interface ResumeOptions extends ResumeTarget {
  resume: boolean;
  messages: HelixMessage[];
}

/** What a kit transport recorded about its chat's responses. */
export interface HelixStreamState {
  cursor: number | null;
  messageId: string | null;
  failure: null | { kind: "network" } | { kind: "refused"; status: number; retryAfterSeconds?: number };
}

export type HeadersOption = Record<string, string> | (() => Record<string, string>);

export interface HelixRoutes {
  sessions(): string;
  session(id: string): string;
  chat(id: string): string;
  snapshot(id: string): string;
  cancel(id: string, runId: string): string;
  recovery(id: string, runId: string): string;
  continueRun(id: string, runId: string): string;
  keep(id: string, runId: string): string;
  discard(id: string, runId: string): string;
  regenerate(id: string, runId: string): string;
  checkStatus(id: string, runId: string): string;
  queued?(id: string, queuedMessageId: string): string;
}

/** The owner's recovery actions, as the routes name them. */
export type RecoveryAction = "continue" | "keep" | "discard" | "regenerate" | "check_status";
export const RECOVERY_ACTIONS: readonly RecoveryAction[];

/** `POST .../runs/<id>/<action>`: `newRunId` is empty unless the action started a run. */
export interface RecoveryResult {
  action: RecoveryAction;
  runId: string;
  /** e.g. `completed`, `provider_in_progress` (Check status), or what the action did. */
  outcome: string;
  newRunId: string;
}

/** `GET .../runs/<id>/recovery`: which actions apply and why not. */
export interface RecoveryInventory {
  runId: string;
  status: string;
  recoveryAction: string;
  actions: Record<RecoveryAction, { available: boolean; reason: string }>;
}

export interface RunOptions {
  /** Where the site mounts helix_django.urls; default `/helix/api`. */
  baseUrl?: string;
  sessionId: string;
  /** Default: the chat's current run, read from the snapshot. */
  runId?: string;
  fetch?: typeof fetch;
  headers?: Record<string, string>;
}

export function runAction(options: RunOptions & { action: RecoveryAction }): Promise<RecoveryResult | null>;
export function continueRun(options: RunOptions): Promise<RecoveryResult | null>;
export function keepRun(options: RunOptions): Promise<RecoveryResult | null>;
export function discardRun(options: RunOptions): Promise<RecoveryResult | null>;
export function regenerateRun(options: RunOptions): Promise<RecoveryResult | null>;
export function checkRunStatus(options: RunOptions): Promise<RecoveryResult | null>;
export function recoveryInventory(options: RunOptions): Promise<RecoveryInventory | null>;
/** Cancel the chat's current run; resolves to its id, or null when the chat has no run. */
export function stopRun(options: Omit<RunOptions, "runId">): Promise<string | null>;

/** What a send does while an answer is live (the `X-Helix-Multitask` values). */
export type MultitaskStrategy = "reject" | "interrupt" | "enqueue";
export const MULTITASK_STRATEGIES: readonly MultitaskStrategy[];

/** The 202 answer of a send queued behind the live answer. */
export interface QueuedSend {
  queuedMessageId: string;
  messageId: string;
  /** 1: the next message to start. */
  position: number;
  /** The live run it waits for. */
  runId: string;
  /** A keyed repeat of a send already queued. */
  duplicate: boolean;
}

/** A user message a snapshot lists as waiting to start. */
export interface QueuedMessage {
  id: string;
  role: "user";
  parts: Array<{ type: string; text?: string; [key: string]: unknown }>;
  metadata?: Record<string, unknown>;
  queuedMessageId: string;
  createdAt: string;
}

export interface UserMessageInput {
  id?: string;
  role?: "user";
  parts: Array<{ type: string; text?: string; [key: string]: unknown }>;
  metadata?: Record<string, unknown>;
}

/** Send a message to start after the live answer (multitask enqueue). */
export function queueMessage(options: {
  baseUrl?: string;
  sessionId: string;
  message: UserMessageInput & { id: string };
  requestKey?: string;
  fetch?: typeof fetch;
  headers?: Record<string, string>;
}): Promise<{ queued: QueuedSend } | { started: true }>;
/** Take a queued message back before it starts; rejects with 409 once it started. */
export function removeQueuedMessage(options: {
  baseUrl?: string;
  sessionId: string;
  queuedMessageId: string;
  fetch?: typeof fetch;
  headers?: Record<string, string>;
}): Promise<true>;
export function queuedMessagesOf(snapshot: { queuedMessages?: QueuedMessage[] } | null | undefined): QueuedMessage[];

export function csrfHeaders(cookieName?: string): Record<string, string>;
export function newMessageId(): string;
export function newRequestKey(): string;
export function newStreamState(): HelixStreamState;
export function routesFor(baseUrl: string): HelixRoutes;
export function resumeHeaders(target?: ResumeTarget): Record<string, string>;
export function snapshotResumeOptions(snapshot: HelixSnapshot, options?: { replayPrefix?: boolean }): ResumeOptions;
export const RESYNC_TRIGGERS: string[];
export function triggerIdentity(chunk: { type: string; data?: any }): string;
export function isResyncTrigger(
  chunk: { type: string; data?: any },
  seen: Set<string>,
  snapshot?: { latestTruncateCheckpointId?: string | null } | null,
): boolean;
export function reattachDelay(
  attempt: number,
  options?: { baseDelayMs?: number; maxDelayMs?: number; retryAfterSeconds?: number; random?: () => number },
): number;
export function waitForReattach(ms: number, options?: { signal?: AbortSignal; events?: EventTarget }): Promise<void>;
export function isReattachable(state: HelixStreamState | null | undefined): boolean;

export function createCursorFetch(options?: { state?: HelixStreamState; fetch?: typeof fetch }): typeof fetch;
export function prepareHelixChatRequest(options: { api: string; headers?: HeadersOption }): (request: {
  id: string;
  messages: HelixMessage[];
  trigger: string;
  messageId?: string;
  headers?: any;
  body?: any;
}) => { api: string; headers: Record<string, string>; body: Record<string, unknown> };
export function prepareHelixReconnectRequest(
  options: {
    api: string;
    state?: HelixStreamState;
    headers?: HeadersOption;
    resumeFromSequence?: number | (() => number | undefined);
    existingMessageId?: string | (() => string | undefined);
    replayPrefix?: boolean | (() => boolean | undefined);
  },
): (request: { headers?: any }) => { api: string; headers: Record<string, string> };

/** Resolves to the snapshot, or null (404: no such chat yet). */
export function fetchSnapshot(
  url: string,
  options?: { fetch?: typeof fetch; signal?: AbortSignal; headers?: Record<string, string> },
): Promise<HelixSnapshot | null>;
export function parseHelixChatError(error: unknown): HelixErrorBody | undefined;
export function holdsTurn(snapshot: HelixSnapshot | null | undefined, messageId: string): boolean;
export function lastUserMessageId(messages: ReadonlyArray<{ id: string; role: string }>): string | null;

/** What `reanchorChat` needs of a chat: a useChat result has it. */
export interface ReanchorableChat {
  setMessages(messages: any[]): void;
  resumeStream(options?: { headers?: Record<string, string> }): Promise<void>;
  clearError?(): void;
}
export function reanchorChat(
  chat: ReanchorableChat,
  options: { snapshotUrl: string; fetch?: typeof fetch; signal?: AbortSignal; state?: HelixStreamState; turn?: string | null },
): Promise<HelixSnapshot | null>;

/** What `helixTransport` adds to its transport as `.helix`. */
export interface HelixTransportHandle {
  sessionId: string;
  state: HelixStreamState;
  routes: HelixRoutes;
  snapshotUrl: string;
  stop(): Promise<string | null>;
  checkStatus(runId?: string): Promise<RecoveryResult | null>;
  continueRun(runId?: string): Promise<RecoveryResult | null>;
  keep(runId?: string): Promise<RecoveryResult | null>;
  discard(runId?: string): Promise<RecoveryResult | null>;
  regenerate(runId?: string): Promise<RecoveryResult | null>;
  recovery(runId?: string): Promise<RecoveryInventory | null>;
  queue(message: UserMessageInput & { id: string }): Promise<{ queued: QueuedSend } | { started: true }>;
  removeQueued(queuedMessageId: string): Promise<true>;
}

export interface HelixTransportOptions {
  sessionId: string;
  baseUrl?: string;
  /** A snapshotResumeOptions result: where the first resume starts. */
  target?: Partial<ResumeOptions>;
  headers?: HeadersOption;
  fetch?: typeof fetch;
}

/** `DefaultChatTransport` is `ai`'s class; "helix-ai-sdk/react" passes it for you. */
export function helixTransport<T>(
  options: HelixTransportOptions & { DefaultChatTransport: new (init: any) => T },
): T & { helix: HelixTransportHandle };
