// Client-minted ids: request keys and user message ids (shared by client.js and aisdk.js).

/** A fresh request key: one per send, reused by its retries (002, "Retried sends"). */
export function newRequestKey() {
  return `rk_${crypto.randomUUID().replaceAll("-", "")}`;
}

/** A fresh UI message id for a user message. */
export function newMessageId() {
  return `msg_${crypto.randomUUID().replaceAll("-", "")}`;
}
