import { statSync } from "node:fs";
import type { Page, Request, Route } from "playwright-core";
import type { TestApp } from "./app.ts";
import { generateClip } from "./media.ts";

/** The console's tus chunk: the first PATCH carries this much. */
export const TUS_CHUNK = 8 * 1024 * 1024;

export const isTus = (request: Request) => new URL(request.url()).pathname.startsWith("/v1/media/tus");

/** A library's videos (its first 100), as the API lists them. */
export const videosInLibrary = async (app: TestApp, libraryId: string) =>
  (await app.request("GET", `/v1/media/libraries/${libraryId}/videos?limit=100`)).body.data as {
    id: string;
    title: string;
    status: string;
  }[];

/** A real video of more than one tus chunk (grain keeps the encoder from squeezing it under one). */
export async function multiChunkClip(workDir: string): Promise<string> {
  const clip = await generateClip(workDir, { seconds: 3.5, width: 320, height: 180, grain: true });
  if (statSync(clip).size <= TUS_CHUNK + 1024 * 1024) throw new Error(`${clip} fits in one chunk`);
  return clip;
}

/** A new video's upload from the console, given by its library page. */
export interface ConsoleUpload {
  libraryId: string;
  /** The library's name: its page's heading. */
  libraryName: string;
  /** The file chosen. */
  file: string;
  /** The new video's title. */
  title: string;
}

export type Release = (how: "continue" | "abort") => Promise<void>;

/**
 * Starts uploading a file as a new video in `tab` and lets its first chunk reach the server; the
 * second is held until `release(how)`: let through, or failed as a dropped connection. Answers the
 * tus upload's id.
 */
export async function startHeldUpload(
  tab: Page,
  upload: ConsoleUpload,
): Promise<{ uploadId: string; release: Release }> {
  await tab.goto(`/console/libraries/${upload.libraryId}`);
  await tab.getByRole("heading", { name: upload.libraryName, level: 1 }).waitFor();
  let patches = 0;
  let reachedSecond: () => void = () => {};
  const secondPatch = new Promise<void>((resolve) => {
    reachedSecond = resolve;
  });
  let release: (how: "continue" | "abort") => void = () => {};
  const released = new Promise<"continue" | "abort">((resolve) => {
    release = resolve;
  });
  const holdSecondPatch = async (route: Route) => {
    if (route.request().method() !== "PATCH" || ++patches !== 2) return route.continue();
    reachedSecond();
    if ((await released) === "continue") await route.continue().catch(() => {});
    else await route.abort().catch(() => {});
  };
  await tab.route("**/v1/media/tus/**", holdSecondPatch);
  const releaseAndUnroute = async (how: "continue" | "abort") => {
    release(how);
    if (!tab.isClosed()) await tab.unroute("**/v1/media/tus/**", holdSecondPatch);
  };
  try {
    await tab.getByLabel("Title").fill(upload.title);
    await tab.getByLabel("Video file").setInputFiles(upload.file);
    const created = tab.waitForResponse(
      (response) => response.request().method() === "POST" && isTus(response.request()),
    );
    await tab.getByRole("button", { name: "Upload", exact: true }).click();
    const location = (await created).headers().location ?? "";
    await secondPatch;
    return { uploadId: location.split("/").pop() ?? "", release: releaseAndUnroute };
  } catch (error) {
    await releaseAndUnroute("abort");
    throw error;
  }
}

/**
 * Starts an upload as `startHeldUpload` does, holds its second chunk and reloads the tab (the person
 * leaves though the browser asks first). Answers the tus upload's id and whether the browser asked.
 */
export async function reloadMidUpload(
  page: Page,
  upload: ConsoleUpload,
): Promise<{ uploadId: string; asked: boolean }> {
  const { uploadId, release } = await startHeldUpload(page, upload);
  try {
    let asked = false;
    const leave = (dialog: { type(): string; accept(): Promise<void> }) => {
      asked = dialog.type() === "beforeunload";
      return dialog.accept();
    };
    page.once("dialog", leave);
    await page.reload();
    page.off("dialog", leave);
    return { uploadId, asked };
  } finally {
    // Only now, so that the held chunk never reaches the server from the page that sent it.
    await release("abort");
  }
}
