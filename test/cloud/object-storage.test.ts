import { statSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SECRET_KEY_FILE } from "../../src/secret-box.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

describe("cloud object storage", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("creates the user with one key pair on first call, and returns the same user later", async () => {
    const other = await t.createOrganization("Bucket people");
    const [first, concurrent] = await Promise.all([
      t.cloud("GET", "/v1/storage/user", { key: other.key }),
      t.cloud("GET", "/v1/storage/user", { key: other.key }),
    ]);
    expect(first.status).toBe(200);
    expect(concurrent.status).toBe(200);
    expect(first.body).toEqual({
      userId: expect.any(String),
      displayName: "Bucket people",
      email: "",
      maxBuckets: 1000,
      suspended: false,
      s3Credentials: [
        {
          accessKey: expect.stringMatching(/^[A-Z0-9]{20}$/),
          secretKey: expect.stringMatching(/^[A-Za-z0-9+/]{40}$/),
          userId: first.body.userId,
        },
      ],
    });
    expect(concurrent.body).toEqual(first.body);
    const later = await t.cloud("GET", "/v1/cloud/storage/user", { key: other.key });
    expect(later.body).toEqual(first.body);
    const mine = await t.cloud("GET", "/v1/storage/user");
    expect(mine.body.userId).not.toBe(first.body.userId);
  });

  it("lists, generates and deletes keys (form, JSON or query)", async () => {
    const user = (await t.cloud("GET", "/v1/storage/user")).body;
    const listed = await t.cloud("GET", "/v1/storage/user/keys");
    expect(listed.body).toEqual(user.s3Credentials);
    const generated = await t.cloud("POST", "/v1/storage/user/keys");
    expect(generated.status).toBe(200);
    expect(generated.body).toHaveLength(2);
    await t.cloud("POST", "/v1/storage/user/keys", { json: {} });
    const all = (await t.cloud("GET", "/v1/storage/user/keys")).body as { accessKey: string }[];
    expect(all).toHaveLength(3);
    const [a, b, c] = all.map((key) => key.accessKey);
    expect(
      (await t.cloud("DELETE", "/v1/storage/user/keys", { form: { access_key: a as string } })).body,
    ).toEqual({
      success: true,
    });
    expect((await t.cloud("DELETE", "/v1/storage/user/keys", { json: { access_key: b } })).status).toBe(200);
    expect((await t.cloud("DELETE", `/v1/storage/user/keys?access_key=${c}`)).status).toBe(200);
    expect((await t.cloud("GET", "/v1/storage/user/keys")).body).toEqual([]);
    const unknown = await t.cloud("DELETE", "/v1/storage/user/keys", { form: { access_key: a as string } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.errors.Error).toEqual(expect.any(String));
    const missing = await t.cloud("DELETE", "/v1/storage/user/keys");
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toHaveProperty("access_key");
  });

  it("generates a new key pair on GET /storage/user once every key has been deleted", async () => {
    const other = await t.createOrganization("Keyless");
    const user = (await t.cloud("GET", "/v1/storage/user", { key: other.key })).body;
    const [old] = user.s3Credentials;
    await t.cloud("DELETE", "/v1/storage/user/keys", { key: other.key, form: { access_key: old.accessKey } });
    expect((await t.cloud("GET", "/v1/storage/user/keys", { key: other.key })).body).toEqual([]);
    const [again, concurrent] = await Promise.all([
      t.cloud("GET", "/v1/storage/user", { key: other.key }),
      t.cloud("GET", "/v1/storage/user", { key: other.key }),
    ]);
    expect(again.status).toBe(200);
    expect(again.body.userId).toBe(user.userId);
    expect(again.body.s3Credentials).toHaveLength(1);
    expect(again.body.s3Credentials[0].accessKey).not.toBe(old.accessKey);
    expect(concurrent.body).toEqual(again.body);
    expect((await t.cloud("GET", "/v1/storage/user/keys", { key: other.key })).body).toEqual(
      again.body.s3Credentials,
    );
  });

  it("keeps secret keys encrypted at rest, under a key file readable by its owner only", async () => {
    const keys = (await t.cloud("POST", "/v1/storage/user/keys")).body as { secretKey: string }[];
    const rows = await t.cumulo.store.db.selectFrom("cloud_s3_keys").select("secret_encrypted").execute();
    const stored = JSON.stringify(rows);
    for (const key of keys) expect(stored).not.toContain(key.secretKey);
    expect(rows.every((row) => row.secret_encrypted.startsWith("v1."))).toBe(true);
    const mode = statSync(join(t.config.dataDir, SECRET_KEY_FILE)).mode & 0o777;
    expect(mode).toBe(0o600);
  });

  it("answers the S3 endpoint", async () => {
    const info = await t.cloud("GET", "/v1/storage/api/s3");
    expect(info.status).toBe(200);
    expect(info.body).toEqual({ url: `${t.baseUrl.replace(/\/v1$/, "")}/s3` });
    // Not the Host the request named: a client or an intermediary chooses that (QA of 4 December).
    // (fetch sends its own Host whatever it is told, so node:http asks.)
    const named = await new Promise<string>((resolve, reject) => {
      const url = new URL(`${t.baseUrl}/v1/storage/api/s3`);
      request(url, { headers: { host: "evil.example.com", apikey: t.adminKey } }, (response) => {
        let text = "";
        response.on("data", (chunk) => {
          text += chunk;
        });
        response.on("end", () => resolve(text));
      })
        .on("error", reject)
        .end();
    });
    expect(JSON.parse(named)).toEqual(info.body);
  });

  it("answers an S3 client at that address with S3's own NotImplemented, which the SDK reports as it is", async () => {
    const { body } = await t.cloud("GET", "/v1/storage/api/s3");
    const user = await t.cloud("GET", "/v1/storage/user");
    const [pair] = user.body.s3Credentials;
    const s3 = new S3Client({
      endpoint: body.url,
      region: "us-east-1",
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: pair.accessKey, secretAccessKey: pair.secretKey },
    });
    const refusal = await s3.send(new ListObjectsV2Command({ Bucket: "media" })).catch((error) => error);
    expect(refusal).toMatchObject({ name: "NotImplemented", $metadata: { httpStatusCode: 501 } });
    expect(refusal.message).toMatch(/does not serve the S3 API/);
    // An object being put is refused before its body is read.
    const put = await fetch(`${body.url}/media/video.mp4`, { method: "PUT", body: new Uint8Array(4 << 20) });
    expect([put.status, put.headers.get("content-type")]).toEqual([501, "application/xml"]);
    expect(await put.text()).toContain("<Code>NotImplemented</Code>");
    s3.destroy();
  });
});
