import createClient, { type Client, type ClientOptions, type Middleware } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

export interface CumuloClientOptions {
  /** Where Cumulo answers, e.g. `https://cumulo.example.com`; empty for the page's own origin. */
  baseUrl: string;
  /** An API key, sent as `X-API-Key` (accepted by every API group). */
  apiKey?: string;
  /**
   * The console's session: the CSRF token of the signed-in session, sent as `X-CSRF-Token` on every
   * request (unsafe methods need it, and so do the GETs that create what they answer, such as
   * `GET /v1/storage/user`). The session itself travels in its cookie, which the browser sends on its own.
   */
  csrfToken?: string | (() => string | undefined);
  /** Passed through to openapi-fetch (a custom `fetch`, extra headers, ...). */
  fetchOptions?: Omit<ClientOptions, "baseUrl">;
}

export type CumuloClient = Client<paths>;

/** A typed client over every Cumulo route: `client.GET("/v1/media/libraries", {...})`. */
export function createCumuloClient(options: CumuloClientOptions): CumuloClient {
  const client = createClient<paths>({ ...options.fetchOptions, baseUrl: options.baseUrl });
  const credentials: Middleware = {
    onRequest({ request }) {
      if (options.apiKey) request.headers.set("X-API-Key", options.apiKey);
      const csrf = typeof options.csrfToken === "function" ? options.csrfToken() : options.csrfToken;
      if (csrf) request.headers.set("X-CSRF-Token", csrf);
      return request;
    },
  };
  client.use(credentials);
  return client;
}
