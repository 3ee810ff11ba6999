// docs/aisdk.md, "The client kit": the whole of the user's code for cursor resume,
// re-attach, resync, Stop and typed errors (tests/browser/test_aisdk_react_app.py runs it).
import { useMemo } from "react";
import { helixTransport, snapshotResumeOptions, useHelixChat } from "helix-ai-sdk/react";

export function KitChat({ sessionId, snapshot, render }) {
  const target = useMemo(
    () => (snapshot ? snapshotResumeOptions(snapshot) : { resume: false, messages: [] }),
    [snapshot],
  );
  const transport = useMemo(() => helixTransport({ sessionId, target }), [sessionId, target]);
  const chat = useHelixChat({
    id: sessionId,
    transport,
    messages: target.messages, // the snapshot without the in-flight message while live
    resume: target.resume, // true only while a run is live
    resync: {}, // re-attach after a drop, re-anchor on the snapshot
  });
  return render({
    messages: chat.messages,
    status: chat.status,
    error: chat.helixError?.code ?? (chat.error ? "untyped" : null),
    send: (text) => chat.sendMessage({ text }),
    stop: chat.stop, // cancels the run on the server
    retry: chat.retry, // re-sends the failed message under its request key
    checkStatus: chat.checkStatus, // asks the provider about an interrupted answer
  });
}
