// docs/aisdk.md, "The client kit": the whole of the user's code for cursor resume,
// re-attach, resync, Stop, recovery actions and typed errors (tests/browser runs it).
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
  // chat: messages, status, stop() (cancels the run on the server), retry() (re-sends an
  // unsent message under its request key), and an interrupted answer's recovery actions:
  // continueRun(), keep(), discard(), regenerateRun(), checkStatus(), recovery() (which apply).
  return render({
    ...chat,
    error: chat.helixError?.code ?? (chat.error ? "untyped" : null),
    send: (text) => chat.sendMessage({ text }),
  });
}
