import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * What the edge calls for a `media://{library_id}` distribution (a media library's own): it answers
 * the viewer itself (access rules included) and returns the bytes of body it sent, for analytics.
 * Implemented by the video domain (`src/video/media-origin.ts`).
 */
export interface MediaOrigin {
  serve(
    request: IncomingMessage,
    response: ServerResponse,
    libraryId: string,
    pathAndQuery: string,
  ): Promise<number>;
}
