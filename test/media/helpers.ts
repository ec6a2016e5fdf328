import { expect } from "vitest";
import type { TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";

export const MISSING_ID = "00000000-0000-4000-8000-000000000000";

export async function createLibrary(t: TestApp, body: Record<string, unknown> = {}, key?: string) {
  const response = await t.request("POST", "/v1/media/libraries", {
    json: { name: "Library", ...body },
    ...(key ? { key } : {}),
  });
  expect(response.status, response.text).toBe(201);
  return response.body.data as { id: string; [field: string]: unknown };
}

/** Waits until the library's distribution is provisioned (its status `active`). */
export async function waitUntilActive(t: TestApp, libraryId: string, timeoutMs = 30_000): Promise<void> {
  await waitUntil(
    async () => (await t.request("GET", `/v1/media/libraries/${libraryId}`)).body.data.status === "active",
    timeoutMs,
    "the library provisioned",
  );
}

export async function createVideo(t: TestApp, libraryId: string, body: Record<string, unknown> = {}) {
  const response = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
    json: { title: "Video", ...body },
  });
  expect(response.status, response.text).toBe(201);
  return response.body.data as { id: string; [field: string]: unknown };
}

export async function createFolder(t: TestApp, libraryId: string, body: Record<string, unknown> = {}) {
  const response = await t.request("POST", `/v1/media/libraries/${libraryId}/folders`, {
    json: { name: "Folder", ...body },
  });
  expect(response.status, response.text).toBe(201);
  return response.body.data as { id: string; parent_id: string | null; [field: string]: unknown };
}

export const fieldErrors = (body: { errors?: { field: string; code: string }[] }) =>
  Object.fromEntries((body.errors ?? []).map((error) => [error.field, error.code]));
