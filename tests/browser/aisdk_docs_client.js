// The wiring of docs/aisdk.md, in plain JS, driven against the chat route with the real `ai`
// package (ai@6.0.326): the cursor-recording fetch, the keyed send, and the reconnect that
// starts from the snapshot's target, then from the recorded cursor.
//
// argv[2]: JSON {mode: "send" | "reload", base, chatId, headers, text?}
// Env AI_NODE_DIR: the folder where `ai` is installed (tests/.node).
// Prints {message, cursor, requestKeys, error} as JSON.
const path = require("path");
const { createRequire } = require("module");

const requireAi = createRequire(path.join(process.env.AI_NODE_DIR, "package.json"));
const { DefaultChatTransport, readUIMessageStream } = requireAi("ai");

// --- docs/aisdk.md §1 -------------------------------------------------------------------
const cursors = new Map();
const requestKeys = [];

function helixFetch(chatId) {
  return async (input, init) => {
    const response = await fetch(input, init);
    const type = response.headers.get("content-type") ?? "";
    if (!response.ok || !response.body || !type.includes("text/event-stream")) return response;
    let buffer = "";
    const decoder = new TextDecoder();
    const recorder = new TransformStream({
      transform(bytes, controller) {
        controller.enqueue(bytes);
        buffer += decoder.decode(bytes, { stream: true });
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = lines.pop() ?? "";
        for (const line of lines) {
          if (!line.startsWith("id:")) continue;
          const sequence = Number(line.slice(3).trim());
          if (Number.isInteger(sequence) && sequence > (cursors.get(chatId) ?? -1)) cursors.set(chatId, sequence);
        }
      },
    });
    return new Response(response.body.pipeThrough(recorder), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

// --- docs/aisdk.md §2 -------------------------------------------------------------------
function snapshotResumeOptions(snapshot) {
  const live = snapshot.status === "active" || snapshot.status === "paused";
  if (!live) return { resume: false, messages: snapshot.messages };
  if (!snapshot.resumeMessageId) {
    return { resume: true, resumeFromSequence: snapshot.streamSequence, messages: snapshot.messages };
  }
  return {
    resume: true,
    resumeFromSequence: snapshot.streamSequence,
    existingMessageId: snapshot.resumeMessageId,
    replayPrefix: true,
    messages: snapshot.messages.filter((m) => m.id !== snapshot.resumeMessageId),
  };
}

// --- docs/aisdk.md §3 -------------------------------------------------------------------
function makeTransport(base, sessionId, staticHeaders, target) {
  const keys = new Map();
  const api = `${base}/sessions/${encodeURIComponent(sessionId)}/chat`;
  return new DefaultChatTransport({
    api,
    fetch: helixFetch(sessionId),
    headers: () => staticHeaders,
    prepareSendMessagesRequest: ({ id, messages, trigger, messageId, headers, body }) => {
      const last = messages[messages.length - 1];
      let key = last?.role === "user" ? keys.get(last.id) : undefined;
      if (!key) {
        key = `rk_${crypto.randomUUID().replaceAll("-", "")}`;
        if (last?.role === "user") keys.set(last.id, key);
      }
      requestKeys.push(key);
      return { api, headers: { ...headers, "X-Helix-Request-Key": key }, body: { ...body, id, messages, trigger, messageId } };
    },
    prepareReconnectToStreamRequest: ({ headers }) => {
      const recorded = cursors.get(sessionId);
      const resumeHeaders =
        recorded === undefined
          ? {
              ...(target.resumeFromSequence !== undefined && { "X-Resume-From-Sequence": String(target.resumeFromSequence) }),
              ...(target.existingMessageId && { "X-Existing-Message-Id": target.existingMessageId }),
              ...(target.replayPrefix && target.existingMessageId && { "X-Helix-Replay-Prefix": "1" }),
            }
          : { "X-Resume-From-Sequence": String(recorded) };
      return { api, headers: { ...resumeHeaders, ...headers } };
    },
  });
}

async function readAll(stream) {
  let message = null;
  let error = null;
  for await (const m of readUIMessageStream({ stream, onError: (e) => { error = String(e?.message || e); } })) {
    message = m;
  }
  return { message, error };
}

async function main() {
  const args = JSON.parse(process.argv[2]);
  let out;
  if (args.mode === "send") {
    const transport = makeTransport(args.base, args.chatId, args.headers, { resume: false });
    const user = { id: `msg_${Date.now()}`, role: "user", parts: [{ type: "text", text: args.text }] };
    const stream = await transport.sendMessages({ chatId: args.chatId, messages: [user], trigger: "submit-message" });
    out = await readAll(stream);
  } else {
    const response = await fetch(`${args.base}/sessions/${args.chatId}/snapshot`, { headers: args.headers });
    const target = snapshotResumeOptions(await response.json());
    const transport = makeTransport(args.base, args.chatId, args.headers, target);
    const stream = await transport.reconnectToStream({ chatId: args.chatId });
    out = stream === null ? { message: null, error: null } : await readAll(stream);
    out.seeded = target.messages.map((m) => m.id);
  }
  process.stdout.write(JSON.stringify({ ...out, cursor: cursors.get(args.chatId) ?? null, requestKeys }));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String(e?.stack || e) }));
  process.exit(1);
});
