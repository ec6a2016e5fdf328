import { useState } from "react";
import { Link } from "react-router";
import { api, call } from "../../api.ts";
import { type Column, DataTable, pagingOf } from "../../components/DataTable.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { useLastPageWhenPastEnd, useLoad } from "../../load.ts";
import type { Video } from "./types.ts";
import { VideoThumbnail } from "./VideoThumbnail.tsx";

const STATUSES = [
  "created",
  "uploading",
  "processing",
  "transcoding",
  "packaging",
  "ready",
  "failed",
] as const;
type Status = (typeof STATUSES)[number];

export function VideoStatus({ status }: { status: string }) {
  return <span className={`status status-${status}`}>{status}</span>;
}

/** The library's videos (of one folder when chosen), with their status. */
export function VideoList({
  libraryId,
  folderId,
  round,
}: {
  libraryId: string;
  folderId: string | null;
  round: number;
}) {
  // The page belongs to the folder it was chosen in: another folder starts at its page 1.
  const [paged, setPaged] = useState({ folderId, page: 1 });
  const page = paged.folderId === folderId ? paged.page : 1;
  const setPage = (next: number) => setPaged({ folderId, page: next });
  const [status, setStatus] = useState<Status | "">("");
  const videos = useLoad(
    () =>
      call(
        api.GET("/v1/media/libraries/{libraryId}/videos", {
          params: {
            path: { libraryId },
            query: {
              page,
              limit: 20,
              ...(folderId ? { folder_id: folderId } : {}),
              ...(status ? { status } : {}),
            },
          },
        }),
      ),
    `${libraryId}|${folderId}|${page}|${status}|${round}`,
  );
  useLastPageWhenPastEnd(videos, page, setPage);
  // Whether the thumbnails need playback tokens; until it is known (or if it cannot be read) each
  // row shows its thumbnail's placeholder. Read again with the list (`round`: the library page's
  // security settings saved, say).
  const security = useLoad(
    () => call(api.GET("/v1/media/libraries/{libraryId}/security", { params: { path: { libraryId } } })),
    `${libraryId}|${round}`,
  );
  const privacy = security.data?.data.video_privacy;
  const columns: Column<Video>[] = [
    {
      header: "Title",
      rowHeader: true,
      cell: (video) => (
        <span className="video-title">
          <VideoThumbnail libraryId={libraryId} video={video} privacy={privacy} />
          <Link to={`/libraries/${libraryId}/videos/${video.id}`}>{video.title}</Link>
        </span>
      ),
    },
    { header: "Status", cell: (video) => <VideoStatus status={video.status} /> },
    {
      header: "Duration",
      // A video without a readable file has no duration; the API's "00:00:00" would read as an empty one.
      cell: (video) =>
        video.duration > 0 ? (
          video.formatted_duration
        ) : (
          <span className="muted" title="Not known until the video is processed">
            —
          </span>
        ),
    },
    { header: "Created", cell: (video) => new Date(video.created_at).toLocaleString() },
  ];
  return (
    <>
      <div className="filters">
        <div className="field">
          <label htmlFor="video-status">Status</label>
          <select
            id="video-status"
            value={status}
            onChange={(event) => {
              setStatus(event.target.value as Status | "");
              setPage(1);
            }}
          >
            <option value="">Any</option>
            {STATUSES.map((value) => (
              <option key={value}>{value}</option>
            ))}
          </select>
        </div>
      </div>
      {videos.state === "loading" && <Loading what="Loading videos" />}
      {videos.state === "error" && <ErrorState error={videos.error} onRetry={videos.reload} />}
      {videos.state === "ready" &&
        (videos.data.data.length === 0 ? (
          <Empty>
            {/* With a status chosen, "yet" read as if the library had no video at all. */}
            {status ? `No video here has the status "${status}".` : "No videos here yet."}
          </Empty>
        ) : (
          <DataTable
            caption="Videos"
            columns={columns}
            rows={videos.data.data}
            rowKey={(video) => video.id}
            paging={pagingOf(videos.data.meta, setPage)}
          />
        ))}
    </>
  );
}
