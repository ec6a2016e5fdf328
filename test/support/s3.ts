import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { S3BlobSettings } from "../../src/config.ts";
import { startTestApp, type TestApp } from "./app.ts";
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
 * there. s3rver makes and removes folders as it writes: one removed while it is being read is read
 * again.
 */
function listObjectFiles(bucketDir: string, triesLeft = 5): string[] {
  try {
    return readdirSync(bucketDir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith(OBJECT_SUFFIX))
      .map((entry) => relative(bucketDir, join(entry.parentPath, entry.name)).split(sep).join("/"))
      .map((path) => path.slice(0, -OBJECT_SUFFIX.length))
      .sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT" || triesLeft <= 1) throw error;
    return listObjectFiles(bucketDir, triesLeft - 1);
  }
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
}): Promise<TestApp> {
  const { s3, store, roles, env = {}, dataDirs } = options;
  const dataDir = store.kind === "postgres" ? mkdtempSync(join(tmpdir(), `cumulo-${roles}-`)) : store.dataDir;
  dataDirs.push(dataDir);
  return startTestApp({ ...s3.env, CUMULO_ROLES: roles, CUMULO_DATA_DIR: dataDir, ...env }, { store });
}
