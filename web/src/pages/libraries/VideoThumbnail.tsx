import { useState } from "react";
import { api, call } from "../../api.ts";
import { type Loaded, useLoad } from "../../load.ts";
import type { Video } from "./types.ts";

/** How the console's page reaches a video's files on the edge: its manifest, and the query every file needs. */
export interface PlaybackAccess {
  manifestUrl: string;
  /** A private library's playback token (`token`, `expires`); empty for the others. */
  tokenQuery: Record<string, string>;
}

/** A URL with more query parameters (a playback token's `token` and `expires`, a cache-busting `v`). */
function withQuery(url: string, query: Record<string, string>): string {
  const result = new URL(url, window.location.origin);
  for (const [name, value] of Object.entries(query)) result.searchParams.set(name, value);
  return result.toString();
}

/**
 * The access to a video's files, once there is something to show (it is ready, or has an uploaded
 * thumbnail) and the library's `privacy` is known. A private library's edge answers 403 without a
 * playback token: the player and the thumbnail both carry the token's `token` and `expires` (valid
 * for every file of the video); the other libraries need none, so nothing is asked then.
 */
export function usePlaybackAccess(
  libraryId: string,
  video: Video | undefined,
  privacy: string | undefined,
): Loaded<PlaybackAccess | undefined> & { reload: () => void } {
  const ready = video?.status === "ready";
  // An uploaded thumbnail is the video's `thumbnail_url` at once, whatever its status (docs/media.md).
  const hasThumbnail = Boolean(video?.thumbnail_url);
  return useLoad(async (): Promise<PlaybackAccess | undefined> => {
    if (!(ready || hasThumbnail) || !video || privacy === undefined) return undefined;
    if (privacy !== "private") return { manifestUrl: video.manifest_url, tokenQuery: {} };
    const token = await call(
      api.POST("/v1/media/libraries/{libraryId}/videos/{videoId}/playback-token", {
        params: { path: { libraryId, videoId: video.id } },
        body: {},
      }),
    );
    return {
      manifestUrl: token.data.manifest_url,
      tokenQuery: { token: token.data.token, expires: String(token.data.expires) },
    };
  }, `${video?.id}|${ready}|${hasThumbnail}|${privacy}`);
}

/**
 * Where the browser loads the video's thumbnail, once its access is known. `v` is the video's
 * `updated_at` (a thumbnail upload changes it): the edge lets browsers keep a thumbnail for minutes,
 * and a new one must show at once, on the video's page and in the list alike.
 */
export function thumbnailAddress(
  video: Video,
  access: Loaded<PlaybackAccess | undefined>,
): string | undefined {
  if (!video.thumbnail_url || access.state !== "ready" || !access.data) return undefined;
  return withQuery(video.thumbnail_url, { ...access.data.tokenQuery, v: video.updated_at });
}

/**
 * A list row's small thumbnail, 16:9, loaded when scrolled near. Until there is one to show (not
 * ready, the token not made yet, the edge refused it) a neutral box of the same size holds its place,
 * so the rows do not move. Decorative (`alt=""`): the video's title is beside it.
 */
export function VideoThumbnail({
  libraryId,
  video,
  privacy,
}: {
  libraryId: string;
  video: Video;
  privacy: string | undefined;
}) {
  const access = usePlaybackAccess(libraryId, video, privacy);
  const source = thumbnailAddress(video, access);
  /** The address the browser could not load (the edge refused it, say). */
  const [refused, setRefused] = useState<string>();
  if (!source || refused === source) return <span className="thumbnail-small thumbnail-placeholder" />;
  return (
    <img
      className="thumbnail-small"
      src={source}
      alt=""
      width={96}
      height={54}
      loading="lazy"
      onError={() => setRefused(source)}
    />
  );
}
