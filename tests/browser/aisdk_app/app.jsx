// A small React app on the AI SDK, as a site would write it, driven by Playwright.
// ?mode=kit|stock|tools&session=<id>. It exposes what it renders as window.helixApp.
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { fetchSnapshot } from "helix-ai-sdk";
import { KitChat } from "./kit_chat.jsx";
import { StockChat } from "./stock_chat.jsx";
import { ToolChat } from "./tool_chat.jsx";

const params = new URLSearchParams(location.search);
const sessionId = params.get("session");
const mode = params.get("mode");

function render(view) {
  window.helixApp = view;
  return (
    <div>
      <p id="status">{view.status}</p>
      <p id="error">{view.error ?? ""}</p>
      <ol id="messages">
        {view.messages.map((m) => (
          <li key={m.id} data-role={m.role}>
            {m.parts.map((p) => (p.type === "text" ? p.text : "")).join("")}
          </li>
        ))}
      </ol>
    </div>
  );
}

function App() {
  const [snapshot, setSnapshot] = useState(undefined);
  useEffect(() => {
    fetchSnapshot(`/helix/api/sessions/${sessionId}/snapshot`).then(setSnapshot, (e) => setSnapshot(null));
  }, []);
  if (snapshot === undefined) return <p id="status">loading</p>;
  if (mode === "stock") return <StockChat sessionId={sessionId} messages={snapshot?.messages ?? []} render={render} />;
  if (mode === "tools") return <ToolChat sessionId={sessionId} snapshot={snapshot} render={render} />;
  return <KitChat sessionId={sessionId} snapshot={snapshot} render={render} />;
}

createRoot(document.getElementById("root")).render(<App />);
