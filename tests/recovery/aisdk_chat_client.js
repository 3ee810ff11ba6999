// Drive the real `ai` package's Chat (ai@6.0.326 AbstractChat, the class every framework's
// `Chat`/`useChat` wraps) against the chat route, across a server kill and the recovery scan.
//
// argv[2]: JSON {api, headers, chatId, text?, cursor?, messages?}
// Env AI_NODE_DIR: the folder where `ai` is installed (tests/.node).
// With `text`: sendMessage({text}), then print one line {phase: "sent", status, error, text, cursor}
// and wait for a line on stdin; then resumeStream() from the last sequence the fetch saw.
// Without `text`: resumeStream() from `cursor` at once (a client attaching after the scan,
// holding the snapshot's `messages`, as a page that loaded it does).
// Last line: {phase: "resumed", status, error, text, cursor}. `text` is the last assistant
// message's text; `error` the Chat's error message (the typed JSON body of an `error` chunk).
const path = require("path");
const readline = require("readline");
const { createRequire } = require("module");

const requireAi = createRequire(path.join(process.env.AI_NODE_DIR, "package.json"));
const { AbstractChat, DefaultChatTransport } = requireAi("ai");

class State {
  constructor(messages) {
    this.messages = messages;
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
  }
  snapshot(value) {
    return structuredClone(value);
  }
}

class Chat extends AbstractChat {
  constructor(init, messages) {
    const state = new State(messages);
    super({ ...init, state });
    this.ownState = state;
  }
}

async function main() {
  const args = JSON.parse(process.argv[2]);
  let cursor = args.cursor ?? null;
  // Record the cursor from the `id:` lines (docs/aisdk.md, "the cursor-recording fetch").
  const recordingFetch = async (input, init) => {
    const response = await fetch(input, init);
    if (!response.ok || !response.body) return response;
    let buffer = "";
    const decoder = new TextDecoder();
    const recorder = new TransformStream({
      transform(bytes, controller) {
        controller.enqueue(bytes);
        buffer += decoder.decode(bytes, { stream: true });
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = lines.pop() ?? "";
        for (const line of lines) {
          const sequence = line.startsWith("id:") ? Number(line.slice(3).trim()) : NaN;
          if (Number.isInteger(sequence) && sequence > (cursor ?? -1)) cursor = sequence;
        }
      },
    });
    return new Response(response.body.pipeThrough(recorder), { status: response.status, headers: response.headers });
  };
  const transport = new DefaultChatTransport({
    api: args.api,
    headers: args.headers,
    fetch: recordingFetch,
    prepareReconnectToStreamRequest: ({ headers }) => ({
      api: args.api,
      headers: { ...headers, ...(cursor === null ? {} : { "X-Resume-From-Sequence": String(cursor) }) },
    }),
  });
  const chat = new Chat({ id: args.chatId, transport }, args.messages || []);
  const report = (phase) => {
    const last = [...chat.ownState.messages].reverse().find((m) => m.role === "assistant");
    const text = last ? last.parts.filter((p) => p.type === "text").map((p) => p.text).join("") : "";
    const error = chat.ownState.error ? String(chat.ownState.error.message || chat.ownState.error) : null;
    process.stdout.write(JSON.stringify({ phase, status: chat.ownState.status, error, text, cursor }) + "\n");
  };
  if (args.text) {
    await chat.sendMessage({ text: args.text });
    report("sent");
    const lines = readline.createInterface({ input: process.stdin });
    await new Promise((resolve) => lines.once("line", resolve));
    lines.close();
  }
  await chat.resumeStream();
  report("resumed");
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String((e && e.stack) || e) }) + "\n");
  process.exit(1);
});
