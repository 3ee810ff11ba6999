// Server-sent events parser for fetch() bodies (WHATWG "event stream interpretation").
//
// The AI SDK's own parser drops `id:` lines, but the chat route stamps every chunk frame
// with its stream sequence as the SSE id (002, "Sequence numbers"), and a client needs that
// cursor to re-attach after a drop. So the client parses the stream itself.
//
// readEventStream(body, { signal }) is an async generator of frames
//   { id: string | null, event: string, data: string }
// `id` is the frame's own `id:` value (null when the frame carried none). Comment lines
// (": keep-alive") and frames without a data line are skipped, as EventSource does.

const decoderOptions = { ignoreBOM: false };

/**
 * Split an event stream into frames.
 * @param {ReadableStream<Uint8Array>} body  a fetch Response body
 * @param {{onBytes?: () => void}} [options]  onBytes is called for every read (heartbeats included)
 * @returns {AsyncGenerator<{id: string|null, event: string, data: string}>}
 */
export async function* readEventStream(body, { onBytes } = {}) {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8", decoderOptions);
  let buffer = "";
  let frame = newFrame();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      onBytes?.();
      buffer += decoder.decode(value, { stream: true });
      let lineEnd;
      while ((lineEnd = findLineEnd(buffer)) !== null) {
        const [index, width] = lineEnd;
        const line = buffer.slice(0, index);
        buffer = buffer.slice(index + width);
        const ready = feedLine(frame, line);
        if (ready) {
          if (ready.data !== null) yield { id: ready.id, event: ready.event || "message", data: ready.data };
          frame = newFrame();
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
  // A trailing frame without its blank line is incomplete: the spec discards it, and so
  // do we (the caller sees a body that ended without a terminal frame: a drop).
}

function newFrame() {
  return { id: null, event: "", dataLines: null };
}

// Returns [index, width] of the first line terminator (CRLF, LF or CR), or null. A CR at
// the very end of the buffer may be the first half of a CRLF, so it waits for more input.
function findLineEnd(buffer) {
  for (let i = 0; i < buffer.length; i += 1) {
    const ch = buffer.charCodeAt(i);
    if (ch === 10) return [i, 1];
    if (ch === 13) {
      if (i + 1 === buffer.length) return null;
      return [i, buffer.charCodeAt(i + 1) === 10 ? 2 : 1];
    }
  }
  return null;
}

// Applies one line to the frame; returns the finished frame on a blank line.
function feedLine(frame, line) {
  if (line === "") {
    return { id: frame.id, event: frame.event, data: frame.dataLines === null ? null : frame.dataLines.join("\n") };
  }
  if (line.startsWith(":")) return null;
  const colon = line.indexOf(":");
  const field = colon === -1 ? line : line.slice(0, colon);
  let value = colon === -1 ? "" : line.slice(colon + 1);
  if (value.startsWith(" ")) value = value.slice(1);
  if (field === "data") {
    if (frame.dataLines === null) frame.dataLines = [];
    frame.dataLines.push(value);
  } else if (field === "id") {
    if (!value.includes("\0")) frame.id = value;
  } else if (field === "event") {
    frame.event = value;
  }
  return null;
}
