import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { BLANK_TEXTS, blankError } from "../support/blank-text.ts";
import { endpointRow } from "../webhooks/helpers.ts";
import { createFolder, createLibrary, createVideo, fieldErrors, MISSING_ID } from "./helpers.ts";

describe("security settings, folders, videos and players", () => {
  let t: TestApp;
  let lib: string;
  beforeAll(async () => {
    t = await startTestApp();
    lib = (await createLibrary(t, { default_privacy: "unlisted" })).id;
  });
  afterAll(() => t.close());

  it("starts with default security settings and merges updates", async () => {
    const initial = await t.request("GET", `/v1/media/libraries/${lib}/security`);
    expect(initial.status).toBe(200);
    expect(initial.body.data).toEqual({
      whitelist_referrers: { action: "allow", values: [], enabled: false },
      blocked_countries: { action: "deny", values: [], enabled: false },
      video_privacy: "unlisted",
    });
    const put = await t.request("PUT", `/v1/media/libraries/${lib}/security`, {
      json: { referrers: { action: "allow", values: ["Example.COM", "*.cdn.example.org"] } },
    });
    expect(put.status).toBe(200);
    expect(put.body.data.whitelist_referrers).toEqual({
      action: "allow",
      values: ["example.com", "*.cdn.example.org"],
      enabled: true,
    });
    const countries = await t.request("PUT", `/v1/media/libraries/${lib}/security`, {
      json: { countries: { action: "deny", values: ["de", "US"], enabled: false }, video_privacy: "private" },
    });
    expect(countries.body.data).toEqual({
      whitelist_referrers: put.body.data.whitelist_referrers,
      blocked_countries: { action: "deny", values: ["DE", "US"], enabled: false },
      video_privacy: "private",
    });
    const again = await t.request("GET", `/v1/media/libraries/${lib}/security`);
    expect(again.body.data).toEqual(countries.body.data);
  });

  it("reports every bad security field at once", async () => {
    const bad = await t.request("PUT", `/v1/media/libraries/${lib}/security`, {
      json: {
        referrers: { action: "block", values: ["ok.com", "ok2.com", "bad host!", "*.", "a..b"] },
        countries: { values: ["DE", "XX", "ZZ", "QM", "XK", "AA", "DEU"] },
        video_privacy: "unlisted",
      },
    });
    expect(bad.status).toBe(400);
    expect(fieldErrors(bad.body)).toEqual({
      "referrers.action": "validation_enum",
      "referrers.values.2": "validation_format",
      "referrers.values.3": "validation_format",
      "referrers.values.4": "validation_format",
      "countries.action": "validation_required",
      "countries.values.1": "validation_format",
      "countries.values.2": "validation_format",
      "countries.values.3": "validation_format",
      "countries.values.4": "validation_format",
      "countries.values.5": "validation_format",
      "countries.values.6": "validation_format",
      video_privacy: "validation_enum",
    });
    const tooMany = await t.request("PUT", `/v1/media/libraries/${lib}/security`, {
      json: { referrers: { action: "deny", values: Array.from({ length: 101 }, (_, i) => `h${i}.com`) } },
    });
    expect(fieldErrors(tooMany.body)).toEqual({ "referrers.values": "validation_max" });
    const noValues = await t.request("PUT", `/v1/media/libraries/${lib}/security`, {
      json: { countries: { action: "allow" } },
    });
    expect(fieldErrors(noValues.body)).toEqual({ "countries.values": "validation_required" });
    const mistyped = await t.request("PUT", `/v1/media/libraries/${lib}/security`, {
      json: {
        video_privacy: 3,
        referrers: { action: 5, values: [] },
        countries: { action: null, values: [] },
      },
    });
    expect(fieldErrors(mistyped.body)).toEqual({
      video_privacy: "validation_type",
      "referrers.action": "validation_type",
      "countries.action": "validation_type",
    });
    expect((await t.request("PUT", `/v1/media/libraries/${MISSING_ID}/security`, { json: {} })).status).toBe(
      404,
    );
  });

  it("creates, lists, moves and reads folders", async () => {
    const root = await createFolder(t, lib, { name: "Root" });
    expect(root).toEqual({
      id: expect.any(String),
      library_id: lib,
      parent_id: null,
      name: "Root",
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    // An id in a body field is matched without regard to case, as in the path and the query.
    const child = await createFolder(t, lib, { name: "Child", parent_id: root.id.toUpperCase() });
    expect(child.parent_id).toBe(root.id);
    const children = await t.request("GET", `/v1/media/libraries/${lib}/folders?parent_id=${root.id}`);
    expect(children.body.data.map((f: { id: string }) => f.id)).toEqual([child.id]);
    expect(children.body.meta.links.self).toBe(
      `/v1/media/libraries/${lib}/folders?limit=20&page=1&parent_id=${root.id}`,
    );
    const got = await t.request("GET", `/v1/media/libraries/${lib}/folders/${child.id}`);
    expect(got.body.data.name).toBe("Child");
    const missingParent = await t.request("POST", `/v1/media/libraries/${lib}/folders`, {
      json: { name: "x", parent_id: MISSING_ID },
    });
    expect(missingParent.status).toBe(404);
    const bad = await t.request("POST", `/v1/media/libraries/${lib}/folders`, {
      json: { parent_id: "nope" },
    });
    expect(fieldErrors(bad.body)).toEqual({ name: "validation_required", parent_id: "validation_format" });
    const cycle = await t.request("PATCH", `/v1/media/libraries/${lib}/folders/${root.id}`, {
      json: { parent_id: child.id },
    });
    expect(cycle.status).toBe(409);
    const moved = await t.request("PATCH", `/v1/media/libraries/${lib}/folders/${child.id}`, {
      json: { parent_id: null, name: "Top" },
    });
    expect(moved.body.data).toMatchObject({ parent_id: null, name: "Top" });
  });

  it("refuses blank folder names, video titles and player names, and keeps spaced ones as sent", async () => {
    const library = (await createLibrary(t)).id;
    const base = `/v1/media/libraries/${library}`;
    const kinds = [
      { path: `${base}/folders`, field: "name" },
      { path: `${base}/videos`, field: "title" },
      { path: `${base}/players`, field: "name" },
    ];
    for (const { path, field } of kinds) {
      const created = await t.request("POST", path, { json: { [field]: " Spaced " } });
      expect(created.status, created.text).toBe(201);
      expect(created.body.data[field]).toBe(" Spaced ");
      for (const blank of BLANK_TEXTS) {
        const refused = await t.request("POST", path, { json: { [field]: blank } });
        expect(refused.status).toBe(400);
        expect(refused.body).toEqual({
          success: false,
          message: "Invalid Request",
          errors: [blankError(field)],
        });
        const patched = await t.request("PATCH", `${path}/${created.body.data.id}`, {
          json: { [field]: blank },
        });
        expect(patched.status).toBe(400);
        expect(patched.body.errors).toEqual([blankError(field)]);
      }
      // Only the first one was written, and it kept its name.
      const listed = await t.request("GET", path);
      expect(listed.body.data.map((item: Record<string, unknown>) => item[field])).toEqual([" Spaced "]);
    }
  });

  it("bulk-deletes folders with nested folders and videos, or nothing", async () => {
    const a = await createFolder(t, lib, { name: "A" });
    const b = await createFolder(t, lib, { name: "B", parent_id: a.id });
    const c = await createFolder(t, lib, { name: "C", parent_id: b.id });
    const keep = await createFolder(t, lib, { name: "Keep" });
    const deep = await createVideo(t, lib, { folder_id: c.id });
    const kept = await createVideo(t, lib, { folder_id: keep.id });

    const other = await createLibrary(t);
    const foreign = await createFolder(t, other.id);
    const refused = await t.request("POST", `/v1/media/libraries/${lib}/folders/bulk`, {
      json: { folder_ids: [a.id, foreign.id] },
    });
    expect(refused.status).toBe(404);
    expect((await t.request("GET", `/v1/media/libraries/${lib}/folders/${a.id}`)).status).toBe(200);

    const bad = await t.request("POST", `/v1/media/libraries/${lib}/folders/bulk`, {
      json: { folder_ids: [] },
    });
    expect(fieldErrors(bad.body)).toEqual({ folder_ids: "validation_min" });
    const badId = await t.request("POST", `/v1/media/libraries/${lib}/folders/bulk`, {
      json: { folder_ids: ["x"] },
    });
    expect(fieldErrors(badId.body)).toEqual({ "folder_ids.0": "validation_format" });

    const done = await t.request("POST", `/v1/media/libraries/${lib}/folders/bulk`, {
      json: { folder_ids: [a.id.toUpperCase()] },
    });
    expect(done.status).toBe(200);
    expect(done.body).toEqual({ success: true, message: expect.any(String), data: { folder_ids: [a.id] } });
    for (const id of [a.id, b.id, c.id]) {
      expect((await t.request("GET", `/v1/media/libraries/${lib}/folders/${id}`)).status).toBe(404);
    }
    expect((await t.request("GET", `/v1/media/libraries/${lib}/videos/${deep.id}`)).status).toBe(404);
    expect((await t.request("GET", `/v1/media/libraries/${lib}/videos/${kept.id}`)).status).toBe(200);
    expect((await t.request("DELETE", `/v1/media/libraries/${lib}/folders/${keep.id}`)).status).toBe(200);
    expect((await t.request("GET", `/v1/media/libraries/${lib}/videos/${kept.id}`)).status).toBe(404);
  });

  it("deletes a folder holding more videos than one statement can name", async () => {
    const library = await createLibrary(t);
    const folder = await createFolder(t, library.id, { name: "Archive" });
    // 33,000 videos: more than SQLite binds in one statement (32,766), written in one statement.
    const count = 33_000;
    const now = new Date().toISOString();
    const postgres = t.cumulo.store.dialect === "postgres";
    const id = postgres
      ? sql`('00000000-0000-4000-8000-' || lpad(n::text, 12, '0'))::uuid`
      : sql`printf('00000000-0000-4000-8000-%012d', n)`;
    const time = postgres ? sql`${now}::timestamptz` : sql`${now}`;
    await sql`
      with recursive numbers(n) as (select 1 union all select n + 1 from numbers where n < ${count})
      insert into media_videos (id, organization_id, library_id, folder_id, title, description, status, duration,
        manifest_url, thumbnail_url, thumbnail_count, direct_play_url, preview_animation_thumbnail_url,
        created_at, updated_at)
      select ${id}, ${sql.lit(library.organization_id)}, ${sql.lit(library.id)}, ${sql.lit(folder.id)},
        'Archived', '', 'created', 0, '', '', 0, '', '', ${time}, ${time}
      from numbers`.execute(t.cumulo.store.db);
    const listed = await t.request(
      "GET",
      `/v1/media/libraries/${library.id}/videos?folder_id=${folder.id}&limit=1`,
    );
    expect(listed.body.meta.pagination.total).toBe(count);

    const deleted = await t.request("DELETE", `/v1/media/libraries/${library.id}/folders/${folder.id}`);
    expect(deleted.status, deleted.text).toBe(200);
    const left = await t.request("GET", `/v1/media/libraries/${library.id}/videos?limit=1`);
    expect(left.body.meta.pagination.total).toBe(0);
  }, 120_000);

  // QA of 5 December (session 42): on SQLite each folder's deletion deleted its subfolders by the
  // foreign key's cascade, a nested trigger per level, and past 1000 levels SQLite refused (500): a
  // chain of 1010 folders could not be deleted, nor its library.
  it("deletes a chain of folders deeper than SQLite nests triggers, alone and with its library", async () => {
    const chain = async (libraryId: string, organizationId: string, depth: number) => {
      const now = new Date().toISOString();
      const ids = Array.from({ length: depth }, () => crypto.randomUUID());
      await t.cumulo.store.db
        .insertInto("media_folders")
        .values(
          ids.map((id, level) => ({
            id,
            organization_id: organizationId,
            library_id: libraryId,
            parent_id: level === 0 ? null : (ids[level - 1] as string),
            name: `level ${level}`,
            created_at: now,
            updated_at: now,
          })),
        )
        .execute();
      return ids;
    };
    const library = await createLibrary(t);
    const [top] = await chain(library.id, library.organization_id as string, 1010);
    const deleted = await t.request("DELETE", `/v1/media/libraries/${library.id}/folders/${top}`);
    expect(deleted.status, deleted.text).toBe(200);
    const left = await t.request("GET", `/v1/media/libraries/${library.id}/folders?limit=1`);
    expect(left.body.meta.pagination.total).toBe(0);
    await chain(library.id, library.organization_id as string, 1010);
    expect((await t.request("DELETE", `/v1/media/libraries/${library.id}`)).status).toBe(200);
  }, 60_000);

  it("creates, filters, updates and deletes videos, emitting webhook events", async () => {
    const organizationId = (await t.request("GET", `/v1/media/libraries/${lib}`)).body.data.organization_id;
    await t.cumulo.store.db
      .insertInto("webhook_endpoints")
      .values(endpointRow(organizationId, lib, { events: JSON.stringify(["created", "deleted"]) }))
      .execute();
    const folder = await createFolder(t, lib, { name: "Videos" });
    const created = await t.request("POST", `/v1/media/libraries/${lib}/videos`, {
      json: { title: "Clip", description: "D", folder_id: folder.id },
    });
    expect(created.status).toBe(201);
    const video = created.body.data;
    expect(video).toEqual({
      id: expect.any(String),
      library_id: lib,
      folder_id: folder.id,
      title: "Clip",
      description: "D",
      status: "created",
      duration: 0,
      formatted_duration: "00:00:00",
      manifest_url: "",
      thumbnail_url: "",
      thumbnail_count: 0,
      direct_play_url: "",
      preview_animation_thumbnail_url: "",
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const message = await t.cumulo.store.db
      .selectFrom("webhook_messages")
      .selectAll()
      .where("video_id", "=", video.id)
      .executeTakeFirst();
    expect(message?.event).toBe("created");
    expect(JSON.parse(message?.body ?? "{}").payload).toMatchObject({
      video_id: video.id,
      libraryId: lib,
      status: "created",
    });

    const inFolder = await t.request(
      "GET",
      `/v1/media/libraries/${lib}/videos?folder_id=${folder.id}&status=created`,
    );
    expect(inFolder.body.data.map((v: { id: string }) => v.id)).toEqual([video.id]);
    const ready = await t.request("GET", `/v1/media/libraries/${lib}/videos?status=ready`);
    expect(ready.body.data).toEqual([]);
    const badStatus = await t.request("GET", `/v1/media/libraries/${lib}/videos?status=done`);
    expect(fieldErrors(badStatus.body)).toEqual({ status: "validation_enum" });

    const patched = await t.request("PATCH", `/v1/media/libraries/${lib}/videos/${video.id}`, {
      json: { title: "New", folder_id: null },
    });
    expect(patched.body.data).toMatchObject({ title: "New", folder_id: null, description: "D" });
    const wrongFolder = await t.request("PATCH", `/v1/media/libraries/${lib}/videos/${video.id}`, {
      json: { folder_id: MISSING_ID },
    });
    expect(wrongFolder.status).toBe(404);
    const badTitle = await t.request("POST", `/v1/media/libraries/${lib}/videos`, { json: { title: "" } });
    expect(fieldErrors(badTitle.body)).toEqual({ title: "validation_min" });

    const deleted = await t.request("DELETE", `/v1/media/libraries/${lib}/videos/${video.id}`);
    expect(deleted.status).toBe(200);
    expect((await t.request("GET", `/v1/media/libraries/${lib}/videos/${video.id}`)).status).toBe(404);
    const events = await t.cumulo.store.db
      .selectFrom("webhook_messages")
      .select("event")
      .where("video_id", "=", video.id)
      .execute();
    expect(events.map((e) => e.event).sort()).toEqual(["created", "deleted"]);

    const doomed = await createVideo(t, lib, { folder_id: folder.id });
    const bulk = await t.request("POST", `/v1/media/libraries/${lib}/folders/bulk`, {
      json: { folder_ids: [folder.id] },
    });
    expect(bulk.status).toBe(200);
    // One notification per event; the dispatcher may add retry attempts to the deliveries meanwhile.
    const doomedEvents = await t.cumulo.store.db
      .selectFrom("webhook_messages")
      .select("event")
      .where("video_id", "=", doomed.id)
      .execute();
    expect(doomedEvents.map((e) => e.event).sort()).toEqual(["created", "deleted"]);
  });

  it("keeps one default player, even under concurrent changes", async () => {
    const library = (await createLibrary(t)).id;
    const first = await t.request("POST", `/v1/media/libraries/${library}/players`, {
      json: { name: "One" },
    });
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({ name: "One", is_default: true, library_id: library });
    expect(first.body.data.theme).toMatchObject({ autoplay: false, loop: false });
    const second = await t.request("POST", `/v1/media/libraries/${library}/players`, {
      json: { name: "Two", theme: { primary_color: "#ff0000", autoplay: true } },
    });
    expect(second.body.data).toMatchObject({
      is_default: false,
      theme: { primary_color: "#ff0000", autoplay: true },
    });
    const badTheme = await t.request("POST", `/v1/media/libraries/${library}/players`, {
      json: { name: "x", theme: { primary_color: "red", controls: ["teleport"] } },
    });
    expect(fieldErrors(badTheme.body)).toEqual({
      "theme.primary_color": "validation_format",
      "theme.controls.0": "validation_enum",
    });

    const players = [first.body.data.id, second.body.data.id];
    for (let i = 0; i < 3; i++) {
      players.push(
        (await t.request("POST", `/v1/media/libraries/${library}/players`, { json: { name: `P${i}` } })).body
          .data.id,
      );
    }
    const marks = await Promise.all(
      [...players, ...players].map((id) =>
        t.request("PATCH", `/v1/media/libraries/${library}/players/${id}/mark-as-default`),
      ),
    );
    expect(marks.map((r) => r.status)).toEqual(marks.map(() => 200));
    expect(marks[0]?.body).toEqual({ success: true, message: expect.any(String) });
    const emptyJson = await t.request(
      "PATCH",
      `/v1/media/libraries/${library}/players/${players[0]}/mark-as-default`,
      {
        body: "",
        headers: { "content-type": "application/json" },
      },
    );
    expect(emptyJson.status).toBe(200);
    const list = await t.request("GET", `/v1/media/libraries/${library}/players?limit=100`);
    expect(list.body.data.filter((p: { is_default: boolean }) => p.is_default)).toHaveLength(1);

    const def = list.body.data.find((p: { is_default: boolean }) => p.is_default);
    const patched = await t.request("PATCH", `/v1/media/libraries/${library}/players/${def.id}`, {
      json: { name: "Renamed", theme: { loop: true } },
    });
    expect(patched.body.data).toMatchObject({ name: "Renamed", is_default: true, theme: { loop: true } });
    expect((await t.request("DELETE", `/v1/media/libraries/${library}/players/${def.id}`)).status).toBe(200);
    const after = await t.request("GET", `/v1/media/libraries/${library}/players`);
    expect(after.body.data.filter((p: { is_default: boolean }) => p.is_default)).toHaveLength(0);
    expect((await t.request("GET", `/v1/media/libraries/${library}/players/${def.id}`)).status).toBe(404);
    // "The first player of a library is its default": a library that still has players stays without
    // one; only a player created when the library has none left becomes the default again.
    const later = await t.request("POST", `/v1/media/libraries/${library}/players`, {
      json: { name: "Later" },
    });
    expect(later.body.data.is_default).toBe(false);
    for (const player of after.body.data.concat(later.body.data) as { id: string }[]) {
      await t.request("DELETE", `/v1/media/libraries/${library}/players/${player.id}`);
    }
    const fresh = await t.request("POST", `/v1/media/libraries/${library}/players`, {
      json: { name: "Fresh" },
    });
    expect(fresh.body.data.is_default).toBe(true);
    expect(
      (await t.request("PATCH", `/v1/media/libraries/${library}/players/${MISSING_ID}/mark-as-default`))
        .status,
    ).toBe(404);
  });

  it("creates the first player of a library as the only default under concurrency", async () => {
    const library = (await createLibrary(t)).id;
    const created = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        t.request("POST", `/v1/media/libraries/${library}/players`, { json: { name: `C${i}` } }),
      ),
    );
    expect(created.map((r) => r.status)).toEqual(created.map(() => 201));
    expect(created.filter((r) => r.body.data.is_default)).toHaveLength(1);
  });
});
