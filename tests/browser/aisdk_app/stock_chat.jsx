// docs/aisdk.md, "Zero-config": the AI SDK's own recipe against `<prefix>chat`.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";

const csrf = () => document.cookie.match(/(?:^|; )csrftoken=([^;]*)/)?.[1] ?? "";

export function StockChat({ sessionId, messages, render }) {
  const chat = useChat({
    id: sessionId,
    messages, // the conversation as the app stored it (here: the snapshot's messages)
    resume: true, // GET /helix/api/chat/<id>/stream on mount: 204 when nothing is live
    transport: new DefaultChatTransport({ api: "/helix/api/chat", headers: () => ({ "X-CSRFToken": csrf() }) }),
  });
  return render({
    messages: chat.messages,
    status: chat.status,
    error: chat.error ? chat.error.message : null,
    send: (text) => chat.sendMessage({ text }),
    stop: chat.stop,
    retry: chat.regenerate,
  });
}
