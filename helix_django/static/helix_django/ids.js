// Client-minted ids: request keys and user message ids (shared by client.js and aisdk.js).

/**
 * 32 random hex digits. `crypto.randomUUID` exists only in secure contexts (HTTPS or
 * localhost); a page served over plain HTTP from another origin has only
 * `crypto.getRandomValues`, which every browser offers everywhere.
 */
export function randomHex() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID().replaceAll("-", "");
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** A fresh request key: one per send, reused by its retries (002, "Retried sends"). */
export function newRequestKey() {
  return `rk_${randomHex()}`;
}

/** A fresh UI message id for a user message. */
export function newMessageId() {
  return `msg_${randomHex()}`;
}
