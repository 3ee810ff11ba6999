// The kit with a client tool (pick_color) and a tool that needs approval (delete_file).
// ?tools=manual leaves a client tool call unanswered (the page reloads before answering it).
import { lastAssistantMessageIsCompleteWithApprovalResponses, lastAssistantMessageIsCompleteWithToolCalls } from "ai";
import { useMemo, useRef } from "react";
import { helixTransport, snapshotResumeOptions, useHelixChat } from "helix-ai-sdk/react";

const answersTools = new URLSearchParams(location.search).get("tools") !== "manual";
window.toolCalls = [];

export function ToolChat({ sessionId, snapshot, render }) {
  const target = useMemo(
    () => (snapshot ? snapshotResumeOptions(snapshot) : { resume: false, messages: [] }),
    [snapshot],
  );
  const transport = useMemo(() => helixTransport({ sessionId, target }), [sessionId, target]);
  const ref = useRef(null);
  const chat = useHelixChat({
    id: sessionId,
    transport,
    messages: target.messages,
    resume: target.resume,
    resync: {},
    onToolCall: ({ toolCall }) => {
      window.toolCalls.push(toolCall.toolCallId);
      if (answersTools && toolCall.toolName === "pick_color") {
        ref.current.addToolOutput({ tool: "pick_color", toolCallId: toolCall.toolCallId, output: { color: "red" } });
      }
    },
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options),
  });
  ref.current = chat;
  const approve = (approved) => {
    const part = chat.messages.at(-1)?.parts.find((p) => p.state === "approval-requested");
    return part ? chat.addToolApprovalResponse({ id: part.approval.id, approved }) : Promise.resolve("none");
  };
  return render({
    messages: chat.messages,
    status: chat.status,
    error: chat.helixError?.code ?? (chat.error ? "untyped" : null),
    send: (text) => chat.sendMessage({ text }),
    stop: chat.stop,
    retry: chat.retry,
    approve,
  });
}
