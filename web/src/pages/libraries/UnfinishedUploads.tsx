import { useEffect, useState } from "react";
import { Link } from "react-router";
import { isMissing, messageOf } from "../../api.ts";
import { DateTime } from "../../components/DateTime.tsx";
import { FormError } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { UploadProgress, useWhereShown, VideoFileField } from "./UploadForm.tsx";
import {
  discardUnfinished,
  forgetUnfinished,
  type RunningUpload,
  sizeInWords,
  type UnfinishedUpload,
  UPLOADING_ELSEWHERE,
  UploadFailed,
  type UploadOwner,
  uploadOnServer,
  uploadVideoFile,
  useUploadOwner,
  useVideoUploads,
} from "./video-uploads.ts";

const goneMessage = (record: UnfinishedUpload, fileInHand: boolean) =>
  `The upload of “${record.fileName}” to “${record.videoTitle}” can no longer be resumed: the server no longer has it (it expired or was removed). ${
    fileInHand
      ? "Its file can be uploaded again from the start."
      : "Upload the file again from the start on the video's page."
  }`;

/**
 * An upload found gone. When the resume found it so, the file is in hand and the notice offers to
 * send it again from the start, to the same video (a new tus upload); otherwise it leads to the video.
 */
interface GoneNotice {
  message: string;
  video: { libraryId: string; videoId: string; title: string };
  file?: File;
  /** Its video was deleted meanwhile: nothing to lead to. */
  videoDeleted?: boolean;
}

/**
 * Uploads of this person from this browser that did not finish (the tab was closed or reloaded, the
 * connection failed), for a library or one video: choosing the same file again continues each from
 * where the server's copy ends. An upload running in this tab as a new one is shown by its own form.
 */
export function UnfinishedUploads({
  libraryId,
  videoId,
  onUploaded,
}: {
  libraryId: string;
  /** Only this video's uploads (on the video's page); its title is then not repeated. */
  videoId?: string;
  /** An upload finished while the person is still on this page. */
  onUploaded?: (videoId: string) => void;
}) {
  const owner = useUploadOwner();
  const { unfinished, running, elsewhere } = useVideoUploads(owner);
  const whereShown = useWhereShown();
  const [notices, setNotices] = useState<GoneNotice[]>([]);
  const shown = unfinished.filter(
    (record) =>
      record.libraryId === libraryId &&
      (videoId === undefined || record.videoId === videoId) &&
      running.get(record.videoId)?.resumed !== false,
  );
  if (shown.length === 0 && notices.length === 0) return null;
  const onGone = (notice: GoneNotice) =>
    setNotices((before) =>
      before.some((shownNotice) => shownNotice.message === notice.message) ? before : [...before, notice],
    );
  const drop = (notice: GoneNotice) => setNotices((before) => before.filter((item) => item !== notice));
  return (
    <section className="panel" aria-labelledby="unfinished-uploads-title">
      <h2 id="unfinished-uploads-title">Unfinished uploads</h2>
      {notices.map((notice) => (
        <GoneUploadNotice
          key={notice.message}
          notice={notice}
          owner={owner}
          running={running.get(notice.video.videoId)}
          showVideo={videoId === undefined}
          whereShown={whereShown}
          onUploaded={(uploaded) => {
            drop(notice);
            onUploaded?.(uploaded);
          }}
        />
      ))}
      {shown.length > 0 && (
        <ul className="unfinished-uploads">
          {shown.map((record) => (
            <UnfinishedUploadItem
              key={record.uploadUrl}
              owner={owner}
              record={record}
              running={running.get(record.videoId)}
              uploadingElsewhere={elsewhere.has(record.videoId)}
              showVideo={videoId === undefined}
              onGone={onGone}
              whereShown={whereShown}
              onUploaded={onUploaded}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function UnfinishedUploadItem({
  owner,
  record,
  running,
  uploadingElsewhere,
  showVideo,
  onGone,
  whereShown,
  onUploaded,
}: {
  owner: UploadOwner;
  record: UnfinishedUpload;
  running: RunningUpload | undefined;
  /** Another tab of this browser is sending it: this one neither continues nor discards it. */
  uploadingElsewhere: boolean;
  showVideo: boolean;
  onGone: (notice: GoneNotice) => void;
  /** Where the person is: the list's `useWhereShown`, since a finished upload's item goes first. */
  whereShown: () => string | undefined;
  onUploaded: ((videoId: string) => void) | undefined;
}) {
  const { readOnly } = useSignedIn();
  const [file, setFile] = useState<File>();
  const onServer = useLoad(() => uploadOnServer(record), record.uploadUrl);
  const serverState = onServer.data?.state;
  const video = { libraryId: record.libraryId, videoId: record.videoId, title: record.videoTitle };
  // biome-ignore lint/correctness/useExhaustiveDependencies: acts once on the server's answer
  useEffect(() => {
    if (serverState === "gone") onGone({ message: goneMessage(record, false), video });
    if (serverState === "gone" || serverState === "complete") forgetUnfinished(owner, record.uploadUrl);
  }, [serverState]);
  const resume = useSubmit(async () => {
    if (!file) throw new Error(`Choose “${record.fileName}” to continue its upload.`);
    const startedOn = whereShown();
    try {
      await uploadVideoFile({ owner, video, file, resuming: record });
    } catch (error) {
      // The video was deleted, or the server dropped the upload: nothing is left to continue.
      if (error instanceof UploadFailed && error.gone) {
        forgetUnfinished(owner, record.uploadUrl);
        onGone({ message: goneMessage(record, true), video, file });
        return;
      }
      if (isMissing(error)) {
        forgetUnfinished(owner, record.uploadUrl);
        onGone({
          message: `The upload of “${record.fileName}” to “${record.videoTitle}” can no longer be resumed: the video was deleted.`,
          video,
          videoDeleted: true,
        });
        return;
      }
      // Part of the file may have arrived before the attempt failed.
      if (error instanceof UploadFailed) onServer.reload();
      throw error;
    }
    if (whereShown() === startedOn) onUploaded?.(record.videoId);
  });
  const discard = useSubmit(() => discardUnfinished(owner, record));
  const server = onServer.data;
  const busyHere = running !== undefined;
  const locked = readOnly || busyHere || uploadingElsewhere;
  return (
    <li className="unfinished-upload">
      <p>
        <strong>{record.fileName}</strong> ({sizeInWords(record.fileSize)})
        {showVideo && (
          <>
            {" "}
            for{" "}
            <Link to={`/libraries/${record.libraryId}/videos/${record.videoId}`}>{record.videoTitle}</Link>
          </>
        )}
        , started <DateTime value={record.startedAt} />
      </p>
      {uploadingElsewhere && (
        <p className="warning" role="status">
          {UPLOADING_ELSEWHERE}
        </p>
      )}
      <p className="field-hint" data-upload-offset={server?.state === "partial" ? server.offset : undefined}>
        {onServer.state === "error"
          ? `How far it got could not be read: ${messageOf(onServer.error)}`
          : server?.state === "partial"
            ? `${sizeInWords(server.offset)} of ${sizeInWords(record.fileSize)} are on the server (${Math.floor((server.offset / record.fileSize) * 100)}%).`
            : "Asking the server how far it got…"}
      </p>
      <form noValidate onSubmit={submitting(resume.submit)}>
        <WriteFields>
          <VideoFileField
            label={`Choose “${record.fileName}” again`}
            hint="The upload continues where it stopped"
            error={resume.errors.file}
            disabled={busyHere || uploadingElsewhere}
            onChange={setFile}
          />
        </WriteFields>
        {running !== undefined && <UploadProgress progress={running.progress} />}
        <FormError message={resume.formError ?? discard.formError} />
        <div className="row-actions">
          <button type="submit" className="primary" disabled={locked}>
            {busyHere ? "Uploading…" : "Resume upload"}
          </button>
          <button type="button" disabled={locked || discard.busy} onClick={() => void discard.submit()}>
            Discard
          </button>
        </div>
      </form>
    </li>
  );
}

/**
 * An upload the server no longer has (404, or 410 once `CUMULO_UPLOAD_EXPIRY_S` passed). With the file
 * chosen for the resume still in hand, "Upload again from the start" sends it to the same video as a
 * new upload; otherwise the video's page offers its file form.
 */
function GoneUploadNotice({
  notice,
  owner,
  running,
  showVideo,
  whereShown,
  onUploaded,
}: {
  notice: GoneNotice;
  owner: UploadOwner;
  running: RunningUpload | undefined;
  showVideo: boolean;
  whereShown: () => string | undefined;
  onUploaded: (videoId: string) => void;
}) {
  const { readOnly } = useSignedIn();
  const { video, file } = notice;
  const restart = useSubmit(async () => {
    if (!file) return;
    const startedOn = whereShown();
    await uploadVideoFile({ owner, video, file });
    if (whereShown() === startedOn) onUploaded(video.videoId);
  });
  return (
    <div className="gone-upload">
      <p className="warning" role="status">
        {notice.message}
      </p>
      {!file && !notice.videoDeleted && showVideo && (
        <p>
          <Link to={`/libraries/${video.libraryId}/videos/${video.videoId}`}>Go to “{video.title}”</Link>
        </p>
      )}
      {file && (
        <form noValidate onSubmit={submitting(restart.submit)}>
          {restart.busy && running !== undefined && <UploadProgress progress={running.progress} />}
          <FormError message={restart.formError} />
          <button
            type="submit"
            className="primary"
            disabled={readOnly || restart.busy || running !== undefined}
          >
            {restart.busy ? "Uploading…" : `Upload “${file.name}” again from the start`}
          </button>
        </form>
      )}
    </div>
  );
}
