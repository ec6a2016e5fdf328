import { readdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createFolder, createLibrary, createVideo } from "../media/helpers.ts";
import { type HttpResponse, startTestApp, type TestApp } from "../support/app.ts";
import { entriesUnder } from "../support/files.ts";
import { lockedFromAnotherConnection } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { createEndpoint, type Receiver, startReceiver, webhooksPath } from "../webhooks/helpers.ts";

const ROUNDS = 6;

/** Statuses of answers made at once: none may be a 5xx, each must be one the operation can give. */
function expectOnly(answers: HttpResponse[], allowed: number[]) {
  for (const answer of answers) expect(allowed, `${answer.status} ${answer.text}`).toContain(answer.status);
}

/**
 * Changes and deletions of one resource sent at the same moment. On PostgreSQL they run side by side
 * (SQLite runs one write transaction at a time); each must wait for the other or find the resource
 * gone, never fail on a reference to a row deleted meanwhile (a 500) or lose the other's change.
 */
describe("concurrent changes of one resource", () => {
  let t: TestApp;
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver((_request, response) => response.writeHead(500).end("no"));
    t = await startTestApp({ CUMULO_RATE_LIMIT: "1000000/1m", CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" });
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  const createVm = async () =>
    (await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "racer" } })).body as { uuid: string };
  const createDisk = async () =>
    (await t.cloud("POST", "/v1/storage/disks", { form: { size_gb: "10" } })).body as { uuid: string };

  it("attaches a disk to, changes and powers a VM while it is deleted: 200 or 404, never 500", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const vm = await createVm();
      const disk = await createDisk();
      const answers = await Promise.all([
        t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
          form: { uuid: vm.uuid, storage_uuid: disk.uuid },
        }),
        t.cloud("PATCH", "/v1/user-resource/vm", { form: { uuid: vm.uuid, vcpu: "2" } }),
        t.cloud("POST", "/v1/user-resource/vm/stop", { form: { uuid: vm.uuid } }),
        t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: vm.uuid } }),
      ]);
      expectOnly(answers, [200, 404]);
      expect(answers[3]?.status).toBe(200);
      // The disk is left detached, whichever came first.
      const after = await t.cloud("GET", `/v1/storage/disks/${disk.uuid}`);
      expect(after.status).toBe(200);
      expect((await t.cloud("DELETE", `/v1/storage/disks/${disk.uuid}`)).status).toBe(200);
    }
  });

  it("keeps both of two changes of a VM and of a disk made at once", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const vm = await createVm();
      const disk = await createDisk();
      expectOnly(
        await Promise.all([
          t.cloud("PATCH", "/v1/user-resource/vm", { form: { uuid: vm.uuid, vcpu: "4", ram: "4096" } }),
          t.cloud("PATCH", "/v1/user-resource/vm", {
            form: { uuid: vm.uuid, name: "renamed", description: "both" },
          }),
          t.cloud("PATCH", `/v1/storage/disks/${disk.uuid}`, { json: { size_gb: 20 } }),
          t.cloud("PATCH", `/v1/storage/disks/${disk.uuid}`, { json: { display_name: "grown" } }),
        ]),
        [200],
      );
      const vms = (await t.cloud("GET", "/v1/user-resource/vm/list")).body as Record<string, unknown>[];
      expect(vms.find((row) => row.uuid === vm.uuid)).toMatchObject({
        vcpu: 4,
        memory: 4096,
        name: "renamed",
        description: "both",
      });
      expect((await t.cloud("GET", `/v1/storage/disks/${disk.uuid}`)).body).toMatchObject({
        size_gb: 20,
        display_name: "grown",
      });
    }
  });

  it("keeps both of two changes of a player's theme made at once", async () => {
    const library = (await createLibrary(t)).id;
    const player = (
      await t.request("POST", `/v1/media/libraries/${library}/players`, { json: { name: "P" } })
    ).body.data;
    const path = `/v1/media/libraries/${library}/players/${player.id}`;
    for (let round = 0; round < ROUNDS; round++) {
      const on = round % 2 === 0;
      expectOnly(
        await Promise.all([
          t.request("PATCH", path, { json: { theme: { loop: on } } }),
          t.request("PATCH", path, { json: { theme: { autoplay: on } } }),
        ]),
        [200],
      );
      expect((await t.request("GET", path)).body.data.theme).toMatchObject({ loop: on, autoplay: on });
    }
  });

  it("keeps one subtitle file after replacing it several times at once", async () => {
    const library = (await createLibrary(t)).id;
    const video = (await createVideo(t, library)).id;
    const subtitles = `/v1/media/libraries/${library}/videos/${video}/subtitles`;
    const form = (text: string) => {
      const data = new FormData();
      data.set("file", new Blob([`WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n${text}\n`]), "s.vtt");
      return data;
    };
    const created = await t.request("POST", subtitles, {
      body: (() => {
        const data = form("first");
        data.set("title", "English");
        data.set("language", "en");
        return data;
      })(),
    });
    expect(created.status, created.text).toBe(201);
    const answers = await Promise.all(
      [1, 2, 3, 4].map((n) =>
        t.request("PUT", `${subtitles}/${created.body.data.id}`, { body: form(`take ${n}`) }),
      ),
    );
    expectOnly(answers, [200]);
    const folder = join(t.store.dataDir, "blobs", "media", library, video, "subtitles");
    await waitUntil(() => readdirSync(folder).length === 1, 5_000, "one subtitle file left");
    expect((await t.request("DELETE", `${subtitles}/${created.body.data.id}`)).status).toBe(200);
    await waitUntil(() => readdirSync(folder).length === 0, 5_000, "no subtitle file left");
  });

  it("adds a subtitle and a thumbnail to a video while it is deleted: 201/200 or 404, never 500", async () => {
    const library = (await createLibrary(t)).id;
    const png = Buffer.from(
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
      "base64",
    );
    for (let round = 0; round < ROUNDS * 2; round++) {
      const video = (await createVideo(t, library)).id;
      const base = `/v1/media/libraries/${library}/videos/${video}`;
      const subtitle = new FormData();
      subtitle.set("title", "English");
      subtitle.set("language", "en");
      subtitle.set("file", new Blob(["WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nhi\n"]), "s.vtt");
      const thumbnail = new FormData();
      thumbnail.set("file", new Blob([png]), "t.png");
      const [added, pictured, deleted] = await Promise.all([
        t.request("POST", `${base}/subtitles`, { body: subtitle }),
        t.request("POST", `${base}/thumbnails`, { body: thumbnail }),
        t.request("DELETE", base),
      ]);
      expectOnly([added], [201, 404]);
      expectOnly([pictured], [200, 404]);
      expectOnly([deleted], [200]);
    }
    // Whichever came first, every file went with its video or its refused upload.
    const folder = join(t.store.dataDir, "blobs", "media", library);
    const filesLeft = () => entriesUnder(folder).filter((entry) => entry.isFile);
    await waitUntil(() => filesLeft().length === 0, 5_000, "no file of the deleted videos left");
  });

  it("deletes one video, its folder and changes it at once: one deletion, one `deleted` notification", async () => {
    const library = (await createLibrary(t)).id;
    await createEndpoint(t, library, { url: receiver.url, events: ["deleted"] });
    for (let round = 0; round < ROUNDS; round++) {
      const folder = (await createFolder(t, library)).id;
      const video = (await createVideo(t, library, { folder_id: folder })).id;
      const base = `/v1/media/libraries/${library}/videos/${video}`;
      const answers = await Promise.all([
        t.request("DELETE", base),
        t.request("PATCH", base, { json: { title: "renamed" } }),
        t.request("DELETE", base),
        t.request("POST", `/v1/media/libraries/${library}/folders/bulk`, { json: { folder_ids: [folder] } }),
        t.request("DELETE", base),
      ]);
      expectOnly(answers, [200, 404]);
      expect(answers[3]?.status).toBe(200);
      const deletions = [answers[0], answers[2], answers[4]].filter((answer) => answer?.status === 200);
      expect(
        deletions.length,
        answers.map((answer) => `${answer.status} ${answer.text}`).join("; "),
      ).toBeLessThan(2);
      const notifications = await t.cumulo.store.db
        .selectFrom("webhook_messages")
        .select("id")
        .where("video_id", "=", video)
        .where("event", "=", "deleted")
        .execute();
      expect(notifications).toHaveLength(1);
    }
  });

  it("deletes a webhook endpoint while a test and a retry of it are asked for: 202 or 404, never 500", async () => {
    const library = (await createLibrary(t)).id;
    for (let round = 0; round < ROUNDS; round++) {
      const endpoint = await createEndpoint(t, library, { url: receiver.url });
      const path = `${webhooksPath(library)}/${endpoint.id}`;
      expect((await t.request("POST", `${path}/test`)).status).toBe(202);
      const attempt = await waitUntil(
        async () => {
          const listed = await t.request("GET", `${path}/events`);
          return listed.body.data?.[0] as { id: string } | undefined;
        },
        10_000,
        "a first attempt",
      );
      const answers = await Promise.all([
        t.request("POST", `${path}/test`),
        t.request("POST", `${path}/events/${attempt.id}/retry`),
        t.request("POST", `${path}/events/${attempt.id}/retry`),
        t.request("DELETE", path),
        t.request("POST", `${path}/test`),
      ]);
      expectOnly(answers, [202, 200, 404]);
      expect(answers[3]?.status).toBe(200);
      expect((await t.request("GET", path)).status).toBe(404);
    }
  });

  // QA of 5 December (session 42): on PostgreSQL a notification chose its endpoints before a
  // deletion of one of them committed, and its attempt's insert then failed the foreign key: 404 for
  // a library that exists, and no video.
  it("creates videos while one of the library's webhook endpoints is deleted: every one 201", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const library = (await createLibrary(t)).id;
      const kept = await createEndpoint(t, library, { url: receiver.url });
      const deleted = await createEndpoint(t, library, { url: receiver.url });
      const answers = await Promise.all([
        ...Array.from({ length: 10 }, (_, index) =>
          t.request("POST", `/v1/media/libraries/${library}/videos`, { json: { title: `v${index}` } }),
        ),
        t.request("DELETE", `${webhooksPath(library)}/${deleted.id}`),
      ]);
      for (const answer of answers.slice(0, 10)) expect(answer.status, answer.text).toBe(201);
      expect(answers[10]?.status).toBe(200);
      expect((await t.request("GET", `${webhooksPath(library)}/${kept.id}`)).status).toBe(200);
    }
  });

  // QA of 5 December (session 42): on PostgreSQL a library's deletion removed its attempts before
  // locking its endpoints, while the dispatcher, recording failed attempts, locks the endpoint first:
  // a deadlock, answered 500, the library kept.
  it("deletes a library while its failed attempts are recorded: 200", async () => {
    for (let round = 0; round < 2 * ROUNDS; round++) {
      const library = (await createLibrary(t)).id;
      for (let index = 0; index < 5; index++) await createEndpoint(t, library, { url: receiver.url });
      await Promise.all(
        Array.from({ length: 30 }, () =>
          t.request("POST", `/v1/media/libraries/${library}/videos`, { json: { title: "failing" } }),
        ),
      );
      await sleep((round % 6) * 4);
      const removal = await t.request("DELETE", `/v1/media/libraries/${library}`);
      expect(removal.status, removal.text).toBe(200);
    }
  });

  // Regression QA of 5 December (session 42): a folder's rename, which takes no lock, answered 500
  // when a deletion of its parent removed it first (its update found no row).
  it("renames a folder while its parent is deleted: 200 or 404, never 500", async () => {
    const library = (await createLibrary(t)).id;
    for (let round = 0; round < ROUNDS; round++) {
      const parent = (await createFolder(t, library, { name: "parent" })).id;
      const child = (await createFolder(t, library, { name: "child", parent_id: parent })).id;
      const answers = await Promise.all([
        t.request("POST", `/v1/media/libraries/${library}/folders/bulk`, { json: { folder_ids: [parent] } }),
        ...Array.from({ length: 8 }, (_, index) =>
          t.request("PATCH", `/v1/media/libraries/${library}/folders/${child}`, {
            json: { name: `n${index}` },
          }),
        ),
      ]);
      expectOnly(answers, [200, 404]);
      expect(answers[0]?.status).toBe(200);
    }
  });

  it("deletes a library while a source is uploaded to one of its videos: the upload 202 or 404, the delete 200", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const library = (await createLibrary(t)).id;
      const video = (await createVideo(t, library)).id;
      const [upload, removal] = await Promise.all([
        t.request("PUT", `/v1/media/libraries/${library}/videos/${video}/source`, {
          headers: { "content-type": "application/octet-stream" },
          body: new Uint8Array(64 * 1024).fill(7),
        }),
        t.request("DELETE", `/v1/media/libraries/${library}`),
      ]);
      expectOnly([upload as HttpResponse], [202, 404]);
      expect(removal.status, removal.text).toBe(200);
      expect((await t.request("GET", `/v1/media/libraries/${library}`)).status).toBe(404);
    }
  });
});

/**
 * A library deleted by another connection (another node, a transaction still open) after a request read
 * it and before that request's insert: the insert then refers to a row that is gone. That request
 * answers 404, what it would get a moment later, not 500.
 */
describe("a child created while another connection deletes its library", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_RATE_LIMIT: "1000000/1m" });
  });
  afterAll(async () => {
    await t.close();
  });

  /** Deletes the library row in a transaction left open: `commit` ends it. */
  async function deletionHeldOpen(libraryId: string): Promise<{ commit: () => Promise<void> }> {
    if (t.store.databaseUrl) {
      const client = new pg.Client({ connectionString: t.store.databaseUrl });
      await client.connect();
      await client.query("begin");
      await client.query("delete from libraries where id = $1", [libraryId]);
      return {
        commit: async () => {
          await client.query("commit");
          await client.end();
        },
      };
    }
    const file = await lockedFromAnotherConnection(t.store.dataDir, { foreignKeys: true });
    file.prepare("delete from libraries where id = ?").run(libraryId);
    return {
      commit: async () => {
        file.exec("commit");
        file.close();
      },
    };
  }

  it("answers 404 to a new video or folder whose library went before its insert", async () => {
    for (const [child, body] of [
      ["videos", { title: "late" }],
      ["folders", { name: "late" }],
    ] as const) {
      const library = (await createLibrary(t)).id;
      const deletion = await deletionHeldOpen(library);
      const creation = t.request("POST", `/v1/media/libraries/${library}/${child}`, { json: body });
      // The request reads the library (still there for it), then its insert waits for the deletion.
      await sleep(300);
      await deletion.commit();
      const answer = await creation;
      expect(answer.status, `${child}: ${answer.text}`).toBe(404);
      expect(answer.body).toEqual({ success: false, message: "Resource not found" });
    }
  });
});
