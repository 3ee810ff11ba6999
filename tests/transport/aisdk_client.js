// Drive the real `ai` package (ai@6.0.326) against the chat route and print the final UIMessage.
//
// argv[2]: JSON {mode: "send" | "regenerate" | "resume", api, headers, chatId, messages?, messageId?,
// resumeHeaders?}; "regenerate" sends `messages` (up to the user turn) as Chat.regenerate() does.
// Env AI_NODE_DIR: the folder where `ai` is installed (tests/.node).
// Prints {message, chunkTypes, error?} as JSON on stdout.
const path = require("path");
const { createRequire } = require("module");

const requireAi = createRequire(path.join(process.env.AI_NODE_DIR, "package.json"));
const { DefaultChatTransport, readUIMessageStream } = requireAi("ai");

async function main() {
  const args = JSON.parse(process.argv[2]);
  const transport = new DefaultChatTransport({
    api: args.api,
    headers: args.headers,
    // The Helix chat route serves POST and GET on one path (002, "The canonical client").
    prepareReconnectToStreamRequest: ({ headers }) => ({
      api: args.api,
      headers: { ...headers, ...(args.resumeHeaders || {}) },
    }),
  });
  let stream;
  if (args.mode === "send" || args.mode === "regenerate") {
    stream = await transport.sendMessages({
      chatId: args.chatId,
      messages: args.messages,
      trigger: args.mode === "send" ? "submit-message" : "regenerate-message",
      messageId: args.messageId,
      abortSignal: undefined,
    });
  } else {
    stream = await transport.reconnectToStream({ chatId: args.chatId });
    if (stream === null) {
      process.stdout.write(JSON.stringify({ message: null, chunkTypes: [] }));
      return;
    }
  }
  const chunkTypes = [];
  const tap = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        chunkTypes.push(chunk.type);
        controller.enqueue(chunk);
      },
    }),
  );
  let message = null;
  let error = null;
  for await (const m of readUIMessageStream({ stream: tap, onError: (e) => { error = String(e && e.message || e); } })) {
    message = m;
  }
  process.stdout.write(JSON.stringify({ message, chunkTypes, error }));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String(e && e.message || e) }));
  process.exit(1);
});
