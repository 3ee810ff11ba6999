// The AI SDK's own recipe against helix_django's default route shape, unchanged:
// `new DefaultChatTransport({ api })` with `api = <prefix>chat` (no prepare* hooks), so a
// send is `POST {api}` and a resume `GET {api}/{chatId}/stream`.
//
// argv[2]: JSON {api, headers, chatId, steps: [{op: "send", messages} | {op: "resume"}]}
// Env AI_NODE_DIR: the folder where `ai` is installed (tests/.node).
// Prints [{message, error}] (one per step; message null when the resume answered 204) as JSON.
const path = require("path");
const { createRequire } = require("module");

const requireAi = createRequire(path.join(process.env.AI_NODE_DIR, "package.json"));
const { DefaultChatTransport, readUIMessageStream } = requireAi("ai");

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
  const transport = new DefaultChatTransport({ api: args.api, headers: args.headers });
  const results = [];
  for (const step of args.steps) {
    try {
      if (step.op === "send") {
        const stream = await transport.sendMessages({ chatId: args.chatId, messages: step.messages, trigger: "submit-message" });
        results.push(await readAll(stream));
      } else {
        const stream = await transport.reconnectToStream({ chatId: args.chatId });
        results.push(stream === null ? { message: null, error: null } : await readAll(stream));
      }
    } catch (e) {
      results.push({ message: null, error: String(e?.message || e) });
    }
  }
  process.stdout.write(JSON.stringify(results));
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String(e?.stack || e) }));
  process.exit(1);
});
