import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, request as relayRequest } from "node:http";
import { tmpdir } from "node:os";
import { join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { S3BlobSettings } from "../../src/config.ts";
import type { StartOptions } from "../../src/core.ts";
import { startTestApp, type TestApp } from "./app.ts";
import { entriesUnder } from "./files.ts";
import { exitOf } from "./process.ts";
import type { TestStore } from "./store.ts";

export interface TestS3 {
  /** Settings of a bucket that exists on the server. */
  settings: S3BlobSettings;
  /** The same, as the environment `cumulo serve` reads. */
  env: Record<string, string>;
  /** Keys of every object in the bucket, sorted. */
  keys(): string[];
  close(): Promise<void>;
}

const BUCKET = "cumulo-test";
const OBJECT_SUFFIX = "._S3rver_object";

/**
 * The objects s3rver holds, read from its directory (not through S3), so a test sees what is really
 * there; s3rver makes and removes folders as it writes.
 */
function listObjectFiles(bucketDir: string): string[] {
  return entriesUnder(bucketDir)
    .filter((entry) => entry.isFile && entry.path.endsWith(OBJECT_SUFFIX))
    .map((entry) => entry.path.split(sep).join("/").slice(0, -OBJECT_SUFFIX.length))
    .sort();
}

/**
 * A real S3-protocol server (s3rver, in a process of its own) on a loopback port, storing its objects
 * in a temporary directory; each call gets its own server and bucket.
 */
export async function startTestS3(): Promise<TestS3> {
  const directory = mkdtempSync(join(tmpdir(), "cumulo-s3-"));
  const script = fileURLToPath(new URL("./s3-server.mjs", import.meta.url));
  const child = spawn(process.execPath, ["--openssl-legacy-provider", script, directory, BUCKET], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /^listening (\d+)$/m.exec(output);
      if (match) resolve(Number(match[1]));
    });
    child.on("exit", (code) => reject(new Error(`s3rver exited with ${code}: ${output}`)));
  });
  const endpoint = `http://127.0.0.1:${port}`;
  // s3rver's fixed credentials: it checks request signatures, so the SDK's signing code runs for real.
  const credentials = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };
  return {
    settings: {
      bucket: BUCKET,
      region: "us-east-1",
      endpoint,
      forcePathStyle: true,
      credentials,
      timeoutMs: 10_000,
    },
    env: {
      CUMULO_BLOB_STORE: "s3",
      CUMULO_S3_BUCKET: BUCKET,
      CUMULO_S3_REGION: "us-east-1",
      CUMULO_S3_ENDPOINT: endpoint,
      CUMULO_S3_FORCE_PATH_STYLE: "true",
      CUMULO_S3_ACCESS_KEY_ID: credentials.accessKeyId,
      CUMULO_S3_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    },
    keys: () => listObjectFiles(join(directory, BUCKET)),
    async close() {
      const exited = exitOf(child);
      child.kill("SIGTERM");
      await exited;
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/**
 * One node of a deployment split by roles on `s3`'s bucket and `store`: a data dir of its own where
 * the store allows it (PostgreSQL; SQLite's file is in the data dir, so there the nodes share the
 * store's). Each node's data dir is added to `dataDirs`, for the caller to look into and remove
 * (the store's own is removed by `drop` too).
 */
export function startS3Node(options: {
  s3: TestS3;
  store: TestStore;
  roles: string;
  env?: Record<string, string>;
  dataDirs: string[];
  /** What `startCumulo` takes besides the store (a logger, a clock). */
  start?: StartOptions;
}): Promise<TestApp> {
  const { s3, store, roles, env = {}, dataDirs, start = {} } = options;
  const dataDir = store.kind === "postgres" ? mkdtempSync(join(tmpdir(), `cumulo-${roles}-`)) : store.dataDir;
  dataDirs.push(dataDir);
  return startTestApp(
    { ...s3.env, CUMULO_ROLES: roles, CUMULO_DATA_DIR: dataDir, ...env },
    { ...start, store },
  );
}

/** How a relay answers one kind of request: passed on, or answered by the relay as a failing S3 would. */
export type RelayAnswer = "relayed" | "unavailable" | "access_denied";

export interface S3Relay {
  url: string;
  /**
   * How deletes (DeleteObject, DeleteObjects) and writes (PutObject, multipart uploads) are answered:
   * `unavailable` is a 503, `access_denied` what S3 answers credentials without `s3:DeleteObject` or
   * `s3:PutObject` (403 AccessDenied; DeleteObjects: 200 with AccessDenied for each key).
   */
  answers: { deletes: RelayAnswer; writes: RelayAnswer };
  close(): Promise<void>;
}

const xmlError = (code: string, message: string) =>
  `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`;

/** The relay's own answer (status and XML body) to a request it does not pass on, given its body. */
function fakeAnswer(answer: Exclude<RelayAnswer, "relayed">, body: string): [number, string] {
  if (answer === "unavailable")
    return [503, xmlError("ServiceUnavailable", "Please reduce your request rate.")];
  const keys = [...body.matchAll(/<Key>([^<]*)<\/Key>/g)].map((match) => match[1]);
  if (keys.length === 0) return [403, xmlError("AccessDenied", "Access Denied")];
  const errors = keys.map(
    (key) => `<Error><Key>${key}</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`,
  );
  return [200, `<?xml version="1.0" encoding="UTF-8"?><DeleteResult>${errors.join("")}</DeleteResult>`];
}

/**
 * An HTTP relay to a test S3 that can answer deletes or writes itself, as a bucket whose policy
 * refuses them or a service failing at them would; every other request is passed on unchanged (the
 * Host header included, so signatures still match).
 */
export async function startS3Relay(target: string): Promise<S3Relay> {
  const { hostname, port } = new URL(target);
  const answers: S3Relay["answers"] = { deletes: "relayed", writes: "relayed" };
  const kindOf = (request: IncomingMessage): keyof S3Relay["answers"] | undefined => {
    const query = new URL(request.url ?? "/", "http://relay").searchParams;
    if (request.method === "DELETE" || (request.method === "POST" && query.has("delete"))) return "deletes";
    if (request.method === "PUT" || request.method === "POST") return "writes";
    return undefined;
  };
  const server = createServer((request, response) => {
    const kind = kindOf(request);
    const answer = kind ? answers[kind] : "relayed";
    if (answer !== "relayed") {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const [status, xml] = fakeAnswer(answer, Buffer.concat(chunks).toString());
        response.writeHead(status, { "content-type": "application/xml" }).end(xml);
      });
      return;
    }
    const upstream = relayRequest(
      { hostname, port, method: request.method, path: request.url, headers: request.headers },
      (answered) => {
        response.writeHead(answered.statusCode ?? 502, answered.headers);
        answered.pipe(response);
      },
    );
    upstream.on("error", () => response.destroy());
    request.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    answers,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
