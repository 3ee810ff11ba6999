// MessageAccumulator: applies AI SDK UI message stream chunks to one UIMessage.
//
// A port of helix_django/protocol.py MessageAccumulator (which follows the AI SDK's
// processUIMessageStream), so the browser renders exactly the message the server commits
// from the same chunks. message = { id, role: "assistant", parts: [...], metadata: {...} }.
// Open text/reasoning parts are tracked by chunk `id`, tool parts by `toolCallId`.
// Unknown or out-of-order chunks are ignored.

export class MessageAccumulator {
  /**
   * @param {string} messageId
   * @param {{parts?: object[], metadata?: object}} [seed]  a message to continue
   */
  constructor(messageId, seed = {}) {
    this.message = {
      id: messageId,
      role: "assistant",
      parts: seed.parts ? structuredClone(seed.parts) : [],
      metadata: { ...(seed.metadata || {}) },
    };
    this.open = new Map();
    this.tools = new Map();
    for (const part of this.message.parts) {
      if (part && part.toolCallId) this.tools.set(part.toolCallId, part);
    }
    this.finishReason = null;
  }

  get parts() {
    return this.message.parts;
  }

  /** Apply one chunk (internal `helix-*` chunks and `_`-prefixed keys are ignored). */
  apply(chunk) {
    const kind = chunk.type || "";
    const handler = HANDLERS[kind];
    if (handler) {
      handler(this, chunk);
    } else if (kind.startsWith("data-") && !chunk.transient) {
      const part = { type: kind, data: chunk.data };
      if ("id" in chunk) {
        part.id = chunk.id;
        const existing = this.parts.find((p) => p.type === kind && p.id === chunk.id);
        if (existing) {
          existing.data = chunk.data;
          return;
        }
      }
      this.parts.push(part);
    }
  }

  /** A copy of the message; with `close`, open parts are marked done. */
  snapshot({ close = false } = {}) {
    const message = structuredClone(this.message);
    if (close) {
      for (const part of message.parts) if (part.state === "streaming") part.state = "done";
    }
    return message;
  }

  openPart(kind, chunk) {
    const part = { type: kind, text: "", state: "streaming" };
    // ai@6 keeps the chunk id on reasoning parts (not on text parts).
    if (kind === "reasoning" && chunk.id !== undefined) part.id = chunk.id;
    if (chunk.providerMetadata) part.providerMetadata = chunk.providerMetadata;
    this.parts.push(part);
    this.open.set(`${kind}:${chunk.id || ""}`, part);
  }

  delta(kind, chunk) {
    const part = this.open.get(`${kind}:${chunk.id || ""}`);
    if (part) part.text += chunk.delta || "";
  }

  endPart(kind, chunk) {
    const key = `${kind}:${chunk.id || ""}`;
    const part = this.open.get(key);
    if (part) {
      part.state = "done";
      this.open.delete(key);
    }
  }

  finishStep() {
    for (const part of this.open.values()) part.state = "done";
    this.open.clear();
  }

  tool(chunk) {
    const callId = chunk.toolCallId;
    let part = this.tools.get(callId);
    if (!part) {
      const name = chunk.toolName || "";
      part = { type: chunk.dynamic ? "dynamic-tool" : `tool-${name}`, toolCallId: callId };
      if (chunk.dynamic) part.toolName = name;
      part.state = "input-streaming";
      part.input = null;
      this.parts.push(part);
      this.tools.set(callId, part);
    }
    return part;
  }

  mergeMetadata(metadata) {
    if (metadata) Object.assign(this.message.metadata, metadata);
  }
}

const existingTool = (acc, chunk) => acc.tools.get(chunk.toolCallId || "");

const HANDLERS = {
  start(acc, chunk) {
    if (chunk.messageId) acc.message.id = chunk.messageId;
    acc.mergeMetadata(chunk.messageMetadata);
  },
  "start-step"(acc) {
    acc.parts.push({ type: "step-start" });
  },
  "text-start": (acc, c) => acc.openPart("text", c),
  "text-delta": (acc, c) => acc.delta("text", c),
  "text-end": (acc, c) => acc.endPart("text", c),
  "reasoning-start": (acc, c) => acc.openPart("reasoning", c),
  "reasoning-delta": (acc, c) => acc.delta("reasoning", c),
  "reasoning-end": (acc, c) => acc.endPart("reasoning", c),
  "finish-step": (acc) => acc.finishStep(),
  "tool-input-start": (acc, c) => acc.tool(c),
  "tool-input-available"(acc, c) {
    Object.assign(acc.tool(c), { state: "input-available", input: c.input });
  },
  "tool-input-error"(acc, c) {
    Object.assign(acc.tool(c), { state: "output-error", input: c.input, errorText: c.errorText || "" });
  },
  "tool-approval-request"(acc, c) {
    const part = existingTool(acc, c);
    if (part) Object.assign(part, { state: "approval-requested", approval: { id: c.approvalId } });
  },
  "tool-output-available"(acc, c) {
    const part = existingTool(acc, c);
    if (part) {
      Object.assign(part, { state: "output-available", output: c.output });
      delete part.errorText;
    }
  },
  "tool-output-error"(acc, c) {
    const part = existingTool(acc, c);
    if (part) Object.assign(part, { state: "output-error", errorText: c.errorText || "" });
  },
  "tool-output-denied"(acc, c) {
    const part = existingTool(acc, c);
    if (part) {
      part.state = "output-denied";
      if (part.approval && typeof part.approval === "object") part.approval.approved = false;
    }
  },
  "source-url": (acc, c) => acc.parts.push(stripReserved(c)),
  "source-document": (acc, c) => acc.parts.push(stripReserved(c)),
  file(acc, c) {
    acc.parts.push({ type: "file", url: c.url, mediaType: c.mediaType });
  },
  finish(acc, c) {
    acc.finishStep();
    acc.finishReason = c.finishReason || null;
    acc.mergeMetadata(c.messageMetadata);
  },
  "message-metadata": (acc, c) => acc.mergeMetadata(c.messageMetadata),
};

function stripReserved(chunk) {
  const out = {};
  for (const [key, value] of Object.entries(chunk)) if (!key.startsWith("_")) out[key] = value;
  return out;
}

/** The concatenated text parts of a UIMessage. */
export function textOf(message) {
  return (message.parts || [])
    .filter((p) => p.type === "text")
    .map((p) => p.text || "")
    .join("");
}
