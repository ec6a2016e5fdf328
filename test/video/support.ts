import { readFileSync } from "node:fs";
import { expect } from "vitest";
import type { TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";

export const videoPath = (libraryId: string, videoId: string) =>
  `/v1/media/libraries/${libraryId}/videos/${videoId}`;

/** Uploads a file as the raw body of the source route. */
export function uploadSource(
  t: TestApp,
  libraryId: string,
  videoId: string,
  body: Uint8Array,
  contentType = "video/mp4",
  key?: string,
) {
  return t.request("PUT", `${videoPath(libraryId, videoId)}/source`, {
    body,
    headers: { "content-type": contentType },
    ...(key ? { key } : {}),
  });
}

export const fileBytes = (path: string) => new Uint8Array(readFileSync(path));

/** Polls the video until its status is one of `statuses` (short intervals). */
export async function waitForStatus(
  t: TestApp,
  libraryId: string,
  videoId: string,
  statuses: string[],
  timeoutMs = 60_000,
) {
  return waitUntil(
    async () => {
      const response = await t.request("GET", videoPath(libraryId, videoId));
      expect(response.status, response.text).toBe(200);
      return statuses.includes(response.body.data.status) ? response.body.data : undefined;
    },
    timeoutMs,
    `video status ${statuses.join(" or ")}`,
  );
}

/** The path of an absolute playback URL, for a request to this test's own edge listener. */
export const pathOf = (url: string) => {
  const parsed = new URL(url);
  return parsed.pathname + parsed.search;
};

/** Master or media playlist URIs (lines and URI="..." attributes). */
export function playlistUris(text: string): string[] {
  const uris: string[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (line.startsWith("#")) {
      for (const match of line.matchAll(/URI="([^"]*)"/g)) if (match[1]) uris.push(match[1]);
    } else uris.push(line);
  }
  return uris;
}

/** Resolves a playlist URI against the path the playlist was fetched from. */
export const resolvePath = (base: string, uri: string) => {
  const resolved = new URL(uri, `http://edge${base}`);
  return resolved.pathname + resolved.search;
};
