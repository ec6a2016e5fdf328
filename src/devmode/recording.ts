import { type Static, Type } from "@sinclair/typebox";
import { isSecretName, MASK, maskUrl } from "../http/masking.ts";

/** Entries kept per organization; the oldest go first. */
export const RECORDING_MAX_ENTRIES = 1000;
export const DEFAULT_BODY_LIMIT = 64 * 1024;

const NameValue = Type.Object({ name: Type.String(), value: Type.String() });

/** One recorded exchange as HAR 1.2 writes it (the fields this recording fills). */
const HarEntry = Type.Object({
  startedDateTime: Type.String(),
  time: Type.Number(),
  request: Type.Object({
    method: Type.String(),
    url: Type.String(),
    httpVersion: Type.String(),
    cookies: Type.Array(NameValue),
    headers: Type.Array(NameValue),
    queryString: Type.Array(NameValue),
    postData: Type.Optional(Type.Object({ mimeType: Type.String(), text: Type.String() })),
    headersSize: Type.Integer(),
    bodySize: Type.Integer(),
  }),
  response: Type.Object({
    status: Type.Integer(),
    statusText: Type.String(),
    httpVersion: Type.String(),
    cookies: Type.Array(NameValue),
    headers: Type.Array(NameValue),
    content: Type.Object({ size: Type.Integer(), mimeType: Type.String(), text: Type.String() }),
    redirectURL: Type.String(),
    headersSize: Type.Integer(),
    bodySize: Type.Integer(),
  }),
  cache: Type.Object({}),
  timings: Type.Object({ send: Type.Number(), wait: Type.Number(), receive: Type.Number() }),
});
export type HarEntry = Static<typeof HarEntry>;

/** A recording as a HAR 1.2 document: the answer of `GET /_cumulo/recording.har`. */
export const Har = Type.Object({
  log: Type.Object({
    version: Type.String(),
    creator: Type.Object({ name: Type.String(), version: Type.String() }),
    entries: Type.Array(HarEntry),
  }),
});

export interface RecordedExchange {
  startedAt: Date;
  durationMs: number;
  method: string;
  /** The request's absolute URL, from its Host header. */
  url: string;
  /** Its path and query, as sent. */
  path: string;
  requestHeaders: Record<string, string>;
  requestBody?: string | undefined;
  /** Bytes of the body as sent, where `requestBody` is only its start; else its length. */
  requestBodySize?: number;
  requestMimeType: string;
  status: number;
  responseHeaders: Record<string, string>;
  responseBody: string | undefined;
  responseMimeType: string;
}

interface Recording {
  bodyLimit: number;
  entries: HarEntry[];
}

/**
 * Per-organization recordings of this process (developer mode runs one process), kept in memory and
 * bounded: at most RECORDING_MAX_ENTRIES entries each, bodies cut at the recording's limit.
 */
export class Recorder {
  readonly #recordings = new Map<string, Recording>();

  start(organizationId: string, bodyLimit = DEFAULT_BODY_LIMIT): void {
    const current = this.#recordings.get(organizationId);
    this.#recordings.set(organizationId, { bodyLimit, entries: current?.entries ?? [] });
  }

  /** Stops recording; the entries stay downloadable until cleared. */
  stop(organizationId: string): void {
    const current = this.#recordings.get(organizationId);
    if (current) current.bodyLimit = -1;
  }

  /** Whether this organization has a recording, on or stopped. */
  has(organizationId: string): boolean {
    return this.#recordings.has(organizationId);
  }

  isRecording(organizationId: string): boolean {
    return (this.#recordings.get(organizationId)?.bodyLimit ?? -1) >= 0;
  }

  status(): { organization_id: string; recording: boolean; entries: number }[] {
    return [...this.#recordings].map(([organizationId, recording]) => ({
      organization_id: organizationId,
      recording: recording.bodyLimit >= 0,
      entries: recording.entries.length,
    }));
  }

  clear(organizationId?: string): void {
    if (organizationId === undefined) this.#recordings.clear();
    else this.#recordings.delete(organizationId);
  }

  record(organizationId: string, exchange: RecordedExchange): void {
    const recording = this.#recordings.get(organizationId);
    if (!recording || recording.bodyLimit < 0) return;
    recording.entries.push(harEntry(exchange, recording.bodyLimit));
    if (recording.entries.length > RECORDING_MAX_ENTRIES) recording.entries.shift();
  }

  entries(organizationId: string): HarEntry[] {
    return this.#recordings.get(organizationId)?.entries ?? [];
  }

  /** The organization's recording as a HAR 1.2 document. */
  har(organizationId: string): Static<typeof Har> {
    return {
      log: {
        version: "1.2",
        creator: { name: "Cumulo developer mode", version: "1" },
        entries: this.entries(organizationId),
      },
    };
  }
}

function harEntry(exchange: RecordedExchange, bodyLimit: number): HarEntry {
  // Absolute as the client addressed the server; a Host header no URL can hold leaves a placeholder.
  const url = URL.canParse(exchange.url)
    ? new URL(exchange.url)
    : new URL(exchange.path, "http://cumulo.local");
  maskUrl(url);
  const requestText = exchange.requestBody && maskBody(exchange.requestBody, exchange.requestMimeType);
  const responseText = exchange.responseBody && maskBody(exchange.responseBody, exchange.responseMimeType);
  return {
    startedDateTime: exchange.startedAt.toISOString(),
    time: exchange.durationMs,
    request: {
      method: exchange.method,
      url: url.toString(),
      httpVersion: "HTTP/1.1",
      cookies: [],
      headers: harHeaders(exchange.requestHeaders),
      queryString: [...url.searchParams].map(([name, value]) => ({ name, value })),
      ...(requestText !== undefined
        ? { postData: { mimeType: exchange.requestMimeType, text: cut(requestText, bodyLimit) } }
        : {}),
      headersSize: -1,
      bodySize:
        exchange.requestBodySize ??
        (exchange.requestBody === undefined
          ? streamedBodySize(exchange.requestHeaders)
          : Buffer.byteLength(exchange.requestBody)),
    },
    response: {
      status: exchange.status,
      statusText: "",
      httpVersion: "HTTP/1.1",
      cookies: [],
      headers: harHeaders(exchange.responseHeaders),
      content: {
        size: exchange.responseBody === undefined ? 0 : Buffer.byteLength(exchange.responseBody),
        mimeType: exchange.responseMimeType,
        text: cut(responseText ?? "", bodyLimit),
      },
      redirectURL: exchange.responseHeaders.location ?? "",
      headersSize: -1,
      bodySize: exchange.responseBody === undefined ? 0 : Buffer.byteLength(exchange.responseBody),
    },
    cache: {},
    timings: { send: 0, wait: exchange.durationMs, receive: 0 },
  };
}

/**
 * A body that was not recorded (streamed to its handler: sources, files, tus): its size as the
 * request declared it, HAR's -1 (unknown) when it came chunked, 0 when there was none.
 */
function streamedBodySize(headers: Record<string, string>): number {
  const declared = Number(headers["content-length"] ?? Number.NaN);
  if (Number.isSafeInteger(declared) && declared >= 0) return declared;
  return headers["transfer-encoding"] === undefined ? 0 : -1;
}

function harHeaders(headers: Record<string, string>) {
  return Object.entries(headers).map(([name, value]) => ({
    name,
    value: isSecretName(name) ? MASK : value,
  }));
}

/**
 * JSON and form bodies get their secret fields masked (and the credentials of URLs in them); other
 * bodies, and bodies with nothing to mask, are kept as they are.
 */
function maskBody(text: string, mimeType: string): string {
  if (/^\s*application\/x-www-form-urlencoded\s*(;|$)/i.test(mimeType)) {
    const fields = [...new URLSearchParams(text)];
    const masked = fields.map(([name, value]): [string, string] => [
      name,
      isSecretName(name) ? MASK : maskUrlText(value),
    ]);
    const changed = masked.some(([, value], index) => value !== fields[index]?.[1]);
    return changed ? new URLSearchParams(masked).toString() : text;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    const masked = JSON.stringify(maskValue(parsed));
    return masked === JSON.stringify(parsed) ? text : masked;
  } catch {
    return text;
  }
}

/**
 * A URL in a body keeps its credentials no better than a field does: a playback URL's token, an
 * invitation link's fragment (the invitation token) are masked. Other text is left as it is.
 */
function maskUrlText(text: string): string {
  if (!/^https?:\/\//i.test(text) || !URL.canParse(text)) return text;
  const url = new URL(text);
  const masked = maskUrl(url);
  if (url.hash === "" && !masked) return text;
  if (url.hash !== "") url.hash = MASK;
  return url.toString();
}

function maskValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskValue);
  if (typeof value === "string") return maskUrlText(value);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value).map(([name, inner]) => [
      name,
      isSecretName(name) && typeof inner === "string" ? MASK : maskValue(inner),
    ]),
  );
}

function cut(text: string, limit: number): string {
  return Buffer.byteLength(text) <= limit ? text : Buffer.from(text).subarray(0, limit).toString();
}
