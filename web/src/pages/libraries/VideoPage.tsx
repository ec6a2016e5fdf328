import { useEffect, useState } from "react";
import { Link, useParams } from "react-router";
import { api, call } from "../../api.ts";
import { CopyButton } from "../../components/Dialog.tsx";
import { Field } from "../../components/Field.tsx";
import { PageHeader } from "../../components/Layout.tsx";
import { ErrorState, Loading } from "../../components/States.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { HlsPlayer } from "./Player.tsx";
import { Subtitles } from "./Subtitles.tsx";
import { VideoStatus } from "./VideoList.tsx";

const STAGES = ["created", "uploading", "processing", "transcoding", "packaging", "ready"] as const;
const FINAL = new Set(["ready", "failed"]);
const POLL_MS = 1500;

/** The processing stages, the current one marked, updated while the video is processed. */
function Stages({ status, failure }: { status: string; failure: string | null }) {
  const current = STAGES.indexOf(status as (typeof STAGES)[number]);
  return (
    <ol className="stages" aria-label="Processing stages">
      {STAGES.map((stage, index) => (
        <li
          key={stage}
          className={index < current || status === "ready" ? "done" : index === current ? "current" : ""}
          aria-current={index === current ? "step" : undefined}
        >
          {stage}
        </li>
      ))}
      {status === "failed" && <li className="failed">failed{failure ? `: ${failure}` : ""}</li>}
    </ol>
  );
}

export function VideoPage() {
  const { libraryId = "", videoId = "" } = useParams();
  const { readOnly } = useSignedIn();
  const path = { libraryId, videoId };
  const video = useLoad(
    () => call(api.GET("/v1/media/libraries/{libraryId}/videos/{videoId}", { params: { path } })),
    videoId,
  );
  const processing = useLoad(
    () => call(api.GET("/v1/media/libraries/{libraryId}/videos/{videoId}/processing", { params: { path } })),
    videoId,
  );
  const context = useLoad(async () => {
    const [players, security] = await Promise.all([
      call(
        api.GET("/v1/media/libraries/{libraryId}/players", {
          params: { path: { libraryId }, query: { page: 1, limit: 100 } },
        }),
      ),
      call(api.GET("/v1/media/libraries/{libraryId}/security", { params: { path: { libraryId } } })),
    ]);
    return { player: players.data.find((player) => player.is_default), privacy: security.data.video_privacy };
  }, libraryId);

  // Polls the stages after each answer until the video is ready or failed, then reads the video again.
  const answer = processing.data;
  const { reload: reloadProcessing } = processing;
  const { reload: reloadVideo } = video;
  useEffect(() => {
    if (answer === undefined) return;
    if (FINAL.has(answer.data.status)) {
      reloadVideo();
      return;
    }
    const timer = setTimeout(reloadProcessing, POLL_MS);
    return () => clearTimeout(timer);
  }, [answer, reloadProcessing, reloadVideo]);

  const ready = video.data?.data.status === "ready";
  const manifest = useLoad(async () => {
    if (!ready || !video.data || context.state !== "ready") return undefined;
    if (context.data.privacy !== "private") return video.data.data.manifest_url;
    const token = await call(
      api.POST("/v1/media/libraries/{libraryId}/videos/{videoId}/playback-token", {
        params: { path },
        body: {},
      }),
    );
    return token.data.manifest_url;
  }, `${ready}|${context.state}`);

  const [thumbnail, setThumbnail] = useState<File>();
  const [thumbnailRound, setThumbnailRound] = useState(0);
  const upload = useSubmit(async () => {
    if (!thumbnail) throw new Error("Choose an image first.");
    await call(
      api.POST("/v1/media/libraries/{libraryId}/videos/{videoId}/thumbnails", {
        params: { path },
        body: { file: thumbnail as unknown as string },
        bodySerializer: () => {
          const form = new FormData();
          form.append("file", thumbnail);
          return form;
        },
      }),
    );
    setThumbnailRound((n) => n + 1);
    video.reload();
  });

  if (video.state === "loading") return <Loading what="Loading the video" />;
  if (video.state === "error") return <ErrorState error={video.error} onRetry={video.reload} />;
  const data = video.data.data;
  const embedCode = `<iframe src="${window.location.origin}/embed/${libraryId}/${videoId}" width="640" height="360" allow="autoplay; fullscreen; picture-in-picture" allowfullscreen title="${data.title.replace(/"/g, "&quot;")}"></iframe>`;

  return (
    <>
      <nav aria-label="Breadcrumb" className="breadcrumb">
        <Link to="/libraries">Libraries</Link> / <Link to={`/libraries/${libraryId}`}>Library</Link> /{" "}
        <span aria-current="page">{data.title}</span>
      </nav>
      <PageHeader title={data.title}>
        <VideoStatus status={data.status} />
      </PageHeader>
      <div className="grid-2">
        <section className="panel" aria-labelledby="player-title">
          <h2 id="player-title">Player</h2>
          {ready && manifest.state === "ready" && manifest.data ? (
            <HlsPlayer manifestUrl={manifest.data} theme={context.data?.player?.theme} title={data.title} />
          ) : manifest.state === "error" ? (
            <ErrorState error={manifest.error} onRetry={manifest.reload} />
          ) : (
            <p className="state">
              {ready ? "Loading the player…" : "The player appears when the video is ready."}
            </p>
          )}
          {context.data?.player && (
            <p className="field-hint">Player: {context.data.player.name} (the library's default)</p>
          )}
        </section>
        <section className="panel" aria-labelledby="processing-title">
          <h2 id="processing-title">Processing</h2>
          {processing.state === "error" ? (
            <ErrorState error={processing.error} onRetry={processing.reload} />
          ) : processing.state === "loading" ? (
            <Loading what="Loading processing" />
          ) : (
            <>
              <Stages status={processing.data.data.status} failure={processing.data.data.failure_reason} />
              <p aria-live="polite" data-processing-status={processing.data.data.status}>
                Status: <VideoStatus status={processing.data.data.status} />
                {data.duration > 0 && ` · ${data.formatted_duration}`}
              </p>
            </>
          )}
        </section>
      </div>
      <section className="panel" aria-labelledby="thumbnail-title">
        <h2 id="thumbnail-title">Thumbnail</h2>
        {data.thumbnail_url && ready ? (
          <img
            className="thumbnail"
            src={`${data.thumbnail_url}${thumbnailRound ? `?v=${thumbnailRound}` : ""}`}
            alt={`Thumbnail of ${data.title}`}
            width={320}
            height={180}
          />
        ) : (
          <p className="state">No thumbnail until the video is ready.</p>
        )}
        <form noValidate onSubmit={submitting(upload.submit)}>
          <Field
            label="New thumbnail (JPEG, PNG or WebP)"
            name="file"
            error={upload.errors.file ?? upload.formError}
          >
            {(control) => (
              <input
                {...control}
                type="file"
                accept="image/jpeg,image/png,image/webp"
                disabled={readOnly}
                onChange={(event) => setThumbnail(event.target.files?.[0])}
              />
            )}
          </Field>
          <button type="submit" disabled={readOnly || upload.busy}>
            Upload thumbnail
          </button>
        </form>
      </section>
      <section className="panel" aria-labelledby="subtitles-title">
        <h2 id="subtitles-title">Subtitles</h2>
        <Subtitles libraryId={libraryId} videoId={videoId} />
      </section>
      <section className="panel" aria-labelledby="embed-title">
        <h2 id="embed-title">Embed code</h2>
        <label htmlFor="embed-code">Paste this into a web page</label>
        <textarea id="embed-code" className="mono" readOnly rows={3} value={embedCode} />
        <CopyButton text={embedCode} label="Copy embed code" />
      </section>
    </>
  );
}
