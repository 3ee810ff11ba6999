// Django's CSRF token for the kit's POSTs (sends, Stop, recovery actions).

/**
 * Read Django's CSRF cookie (`csrftoken`, or `cookieName`) into the `X-CSRFToken` header.
 * @returns {Record<string, string>} `{}` outside a browser or without the cookie
 */
export function csrfHeaders(cookieName = "csrftoken") {
  if (typeof document === "undefined" || !document.cookie) return {};
  const match = document.cookie.match(new RegExp(`(?:^|; )${cookieName}=([^;]*)`));
  return match ? { "X-CSRFToken": decodeURIComponent(match[1]) } : {};
}
