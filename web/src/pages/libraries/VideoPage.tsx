import { useEffect, useRef, useState } from "react";
import { Link, useNavigate, useParams } from "react-router";
import { api, call, isMissing, removing } from "../../api.ts";
import { ConfirmDialog, CopyButton, Dialog } from "../../components/Dialog.tsx";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { PageHeader } from "../../components/Layout.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { ErrorState, Loading, Missing } from "../../components/States.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { HlsPlayer, WHO_MAY_PLAY } from "./Player.tsx";
import { Subtitles } from "./Subtitles.tsx";
import { UnfinishedUploads } from "./UnfinishedUploads.tsx";
import { VideoFileForm } from "./UploadForm.tsx";
import { VideoStatus } from "./VideoList.tsx";
import { thumbnailAddress, usePlaybackAccess } from "./VideoThumbnail.tsx";
import { useUploadOwner, useVideoUploads } from "./video-uploads.ts";

const STAGES = ["created", "uploading", "processing", "transcoding", "packaging", "ready"] as const;
const FINAL = new Set(["ready", "failed"]);
const POLL_MS = 1500;

/** The processing stages, the current one marked, updated while the video is processed. */
function Stages({ status }: { status: string }) {
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
      {status === "failed" && <li className="failed">failed</li>}
    </ol>
  );
}

/** Why processing failed, in a sentence; the pipeline's own text (ffmpeg or ffprobe output) on request. */
function Failure({ reason }: { reason: string | null }) {
  // ffprobe refuses the file before anything is transcoded: the upload was not a video it can read.
  const unreadable = reason === null || /ffprobe|no video stream|no duration/i.test(reason);
  return (
    <div className="failure" role="alert">
      <p>
        {unreadable ? "The file could not be read as a video." : "The video could not be processed."} Upload
        the file again as a new video, or another file.
      </p>
      {reason && (
        <details>
          <summary>Technical details</summary>
          <pre className="code-block">{reason}</pre>
        </details>
      )}
    </div>
  );
}

/** The video's title (its only name in the console and in the API's lists). */
function RenameForm({
  title,
  onSave,
  onCancel,
}: {
  title: string;
  onSave: (title: string) => Promise<void>;
  onCancel: () => void;
}) {
  const [value, setValue] = useState(title);
  const { submit, busy, errors, formError } = useSubmit(() => onSave(value));
  return (
    <form noValidate onSubmit={submitting(submit)}>
      <Field label="Title" name="title" error={errors.title}>
        {(control) => <input {...control} value={value} onChange={(event) => setValue(event.target.value)} />}
      </Field>
      <OtherErrors errors={errors} shown={["title"]} />
      <FormError message={formError} />
      <div className="dialog-actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="primary" disabled={busy}>
          Save title
        </button>
      </div>
    </form>
  );
}

export function VideoPage() {
  const { libraryId = "", videoId = "" } = useParams();
  const { readOnly } = useSignedIn();
  const navigate = useNavigate();
  const [renaming, setRenaming] = useState(false);
  const [deleting, setDeleting] = useState(false);
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
    const [library, players, security] = await Promise.all([
      call(api.GET("/v1/media/libraries/{libraryId}", { params: { path: { libraryId } } })),
      call(
        api.GET("/v1/media/libraries/{libraryId}/players", {
          params: { path: { libraryId }, query: { page: 1, limit: 100 } },
        }),
      ),
      call(api.GET("/v1/media/libraries/{libraryId}/security", { params: { path: { libraryId } } })),
    ]);
    return {
      libraryName: library.data.name,
      player: players.data.find((player) => player.is_default),
      privacy: security.data.video_privacy,
    };
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

  // The video leaves `created` when an upload of this tab ends (from this page or another): read it
  // again, so the file form goes.
  const owner = useUploadOwner();
  const uploadingHere = useVideoUploads(owner).running.has(videoId);
  const wasUploading = useRef(uploadingHere);
  useEffect(() => {
    if (wasUploading.current && !uploadingHere) reloadVideo();
    wasUploading.current = uploadingHere;
  }, [uploadingHere, reloadVideo]);

  const ready = video.data?.data.status === "ready";
  const hasThumbnail = Boolean(video.data?.data.thumbnail_url);
  const isPrivate = context.data?.privacy === "private";
  const playback = usePlaybackAccess(libraryId, video.data?.data, context.data?.privacy);

  const [thumbnail, setThumbnail] = useState<File>();
  const thumbnailInput = useRef<HTMLInputElement>(null);
  /** The thumbnail address the browser could not load (the edge refused it, say). */
  const [refusedThumbnail, setRefusedThumbnail] = useState<string>();
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
    // The file is sent: the input is emptied, so a second click does not send it again.
    setThumbnail(undefined);
    if (thumbnailInput.current) thumbnailInput.current.value = "";
    video.reload();
  });

  if (video.state === "loading") return <Loading what="Loading the video" />;
  if (video.state === "error" && isMissing(video.error)) {
    return (
      <Missing title="Video not found">
        This library has no video with this address; it may have been deleted.{" "}
        <Link to={`/libraries/${libraryId}`}>Go to the library</Link>.
      </Missing>
    );
  }
  if (video.state === "error") return <ErrorState error={video.error} onRetry={video.reload} />;
  const data = video.data.data;
  const embedUrl = `${window.location.origin}/embed/${libraryId}/${videoId}`;
  const embedCode = `<iframe src="${embedUrl}" width="640" height="360" allow="autoplay; fullscreen; picture-in-picture" allowfullscreen title="${data.title.replace(/"/g, "&quot;")}"></iframe>`;
  const thumbnailSrc = thumbnailAddress(data, playback);

  return (
    <>
      <nav aria-label="Breadcrumb" className="breadcrumb">
        <Link to="/libraries">Libraries</Link> /{" "}
        <Link to={`/libraries/${libraryId}`}>{context.data?.libraryName ?? "Library"}</Link> /{" "}
        <span aria-current="page">{data.title}</span>
      </nav>
      <PageHeader title={data.title}>
        <VideoStatus status={data.status} />
        <button type="button" disabled={readOnly} onClick={() => setRenaming(true)}>
          Rename
        </button>
        <button type="button" className="danger" disabled={readOnly} onClick={() => setDeleting(true)}>
          Delete video
        </button>
      </PageHeader>
      <UnfinishedUploads libraryId={libraryId} videoId={videoId} />
      {data.status === "created" && (
        <section className="panel" aria-labelledby="video-file-title">
          <h2 id="video-file-title">Upload the video's file</h2>
          <VideoFileForm libraryId={libraryId} videoId={videoId} title={data.title} />
        </section>
      )}
      <div className="grid-2">
        <section className="panel" aria-labelledby="player-title">
          <h2 id="player-title">Player</h2>
          {ready && playback.state === "ready" && playback.data?.manifestUrl ? (
            <HlsPlayer
              manifestUrl={playback.data.manifestUrl}
              theme={context.data?.player?.theme}
              title={data.title}
            />
          ) : playback.state === "error" ? (
            <ErrorState error={playback.error} onRetry={playback.reload} />
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
              <Stages status={processing.data.data.status} />
              <p aria-live="polite" data-processing-status={processing.data.data.status}>
                Status: <VideoStatus status={processing.data.data.status} />
                {data.duration > 0 && ` · ${data.formatted_duration}`}
              </p>
              {processing.data.data.status === "failed" && (
                <Failure reason={processing.data.data.failure_reason} />
              )}
            </>
          )}
        </section>
      </div>
      <section className="panel" aria-labelledby="thumbnail-title">
        <h2 id="thumbnail-title">Thumbnail</h2>
        {thumbnailSrc && refusedThumbnail !== thumbnailSrc ? (
          <img
            className="thumbnail"
            src={thumbnailSrc}
            alt={`Thumbnail of ${data.title}`}
            width={320}
            height={180}
            onError={() => setRefusedThumbnail(thumbnailSrc)}
          />
        ) : (
          <p className="state">
            {!hasThumbnail
              ? data.status === "failed"
                ? "No thumbnail: processing failed. Upload one below."
                : "No thumbnail until the video is ready or one is uploaded."
              : thumbnailSrc && refusedThumbnail === thumbnailSrc
                ? `The thumbnail could not be shown on this page. ${WHO_MAY_PLAY}`
                : playback.state === "error"
                  ? "The thumbnail of a private video needs a playback token, which could not be made."
                  : "Loading the thumbnail…"}
          </p>
        )}
        <form noValidate onSubmit={submitting(upload.submit)}>
          <WriteFields>
            <Field
              label="New thumbnail (JPEG, PNG or GIF)"
              name="file"
              error={upload.errors.file ?? upload.formError}
            >
              {(control) => (
                <input
                  {...control}
                  ref={thumbnailInput}
                  type="file"
                  accept=".jpg,.jpeg,.png,.gif,image/jpeg,image/png,image/gif"
                  onChange={(event) => setThumbnail(event.target.files?.[0])}
                />
              )}
            </Field>
          </WriteFields>
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
        {data.status === "failed" ? (
          <p className="state" data-embed="failed">
            No embed code: this video's processing failed, so it would never play. Upload the file again as a
            new video.
          </p>
        ) : isPrivate ? (
          <div className="embed-private" data-embed="private">
            <p>
              Videos of this library are <strong>private</strong>: an embed plays only with a signed playback
              token, so there is no embed code to copy here.
            </p>
            <p>
              Your server asks for a token with an API key,{" "}
              <code className="break">
                POST /v1/media/libraries/{libraryId}/videos/{videoId}/playback-token
              </code>{" "}
              (<code>createPlaybackToken</code>, valid for up to 24 hours), and puts the answer's{" "}
              <code>token</code> and <code>expires</code> in the address of the embed page:
            </p>
            <p className="code-block">{embedUrl}?token=TOKEN&amp;expires=EXPIRES</p>
            <p>
              <a href="/docs" target="_blank" rel="noreferrer">
                API reference
              </a>{" "}
              (operation <code>createPlaybackToken</code>)
            </p>
          </div>
        ) : (
          <>
            <label htmlFor="embed-code">Paste this into a web page</label>
            <textarea id="embed-code" className="mono" readOnly rows={3} value={embedCode} />
            <CopyButton text={embedCode} label="Copy embed code" />
          </>
        )}
      </section>
      <Dialog open={renaming} title="Rename video" onClose={() => setRenaming(false)}>
        <RenameForm
          title={data.title}
          onCancel={() => setRenaming(false)}
          onSave={async (title) => {
            await call(
              api.PATCH("/v1/media/libraries/{libraryId}/videos/{videoId}", {
                params: { path },
                body: { title },
              }),
            );
            setRenaming(false);
            video.reload();
          }}
        />
      </Dialog>
      <ConfirmDialog
        open={deleting}
        title="Delete video"
        confirmLabel="Delete video"
        onClose={() => setDeleting(false)}
        onConfirm={async () => {
          await removing(
            api.DELETE("/v1/media/libraries/{libraryId}/videos/{videoId}", { params: { path } }),
          );
          navigate(`/libraries/${libraryId}`, { replace: true });
        }}
      >
        <p>
          Delete <strong>{data.title}</strong> with its files, subtitles and thumbnails? Embeds and links to
          it stop working.
        </p>
      </ConfirmDialog>
    </>
  );
}
