import { useCallback, useEffect, useId, useRef, useState } from "react";
import { useLocation, useNavigate } from "react-router";
import { api, call } from "../../api.ts";
import { Field, FormError } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useSignedIn } from "../../session.tsx";
import {
  forgetUnfinishedOfVideo,
  maxUploadBytes,
  refuseTooLarge,
  sizeInWords,
  tooLarge,
  UPLOADING_ELSEWHERE,
  UploadFailed,
  uploadVideoFile,
  useUploadOwner,
  useVideoUploads,
} from "./video-uploads.ts";

/**
 * Where the person is now (the path, `undefined` once the form is gone): an upload that ends
 * elsewhere does not take them anywhere.
 */
export function useWhereShown(): () => string | undefined {
  const location = useLocation();
  const shown = useRef({ mounted: true, pathname: location.pathname });
  shown.current.pathname = location.pathname;
  useEffect(() => {
    shown.current.mounted = true;
    return () => {
      shown.current.mounted = false;
    };
  }, []);
  return useCallback(() => (shown.current.mounted ? shown.current.pathname : undefined), []);
}

/** A video file input with the server's limit as its hint, refusing a larger file at once. */
export function VideoFileField({
  label,
  hint,
  error,
  disabled,
  onChange,
}: {
  label: string;
  hint?: string;
  error: string | undefined;
  /** Besides a read-only user's (the form's `WriteFields`): while the file is on its way, say. */
  disabled?: boolean;
  onChange: (file: File | undefined) => void;
}) {
  const [limit, setLimit] = useState<number>();
  const [file, setFile] = useState<File>();
  useEffect(() => {
    let current = true;
    maxUploadBytes().then((value) => current && setLimit(value));
    return () => {
      current = false;
    };
  }, []);
  const hints = [hint, limit === undefined ? undefined : `At most ${sizeInWords(limit)}`].filter(Boolean);
  const overLimit = file && limit !== undefined && file.size > limit ? tooLarge(limit) : undefined;
  return (
    <Field label={label} name="file" hint={hints.join(". ") || undefined} error={error ?? overLimit}>
      {(control) => (
        <input
          {...control}
          type="file"
          accept="video/*"
          disabled={disabled}
          onChange={(event) => {
            setFile(event.target.files?.[0]);
            onChange(event.target.files?.[0]);
          }}
        />
      )}
    </Field>
  );
}

export function UploadProgress({ progress }: { progress: number }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>Upload progress</label>
      <progress id={id} className="progress" max={1} value={progress}>
        {Math.round(progress * 100)}%
      </progress>
      <span aria-live="polite">{Math.round(progress * 100)}%</span>
    </div>
  );
}

interface UploadedVideo {
  libraryId: string;
  videoId: string;
  title: string;
}

/**
 * Creates a video and uploads its source (`uploadVideoFile`), with progress.
 *
 * An upload goes on when the person leaves the form for another page of the console (the video then
 * appears in its library's list; nobody is taken to it), and closing or reloading the tab meanwhile
 * asks first. A failed upload whose bytes the server never confirmed deletes the video it created;
 * one that got part of the file is left to be resumed.
 */
export function UploadForm({
  libraryId,
  folderId,
  onUploaded,
}: {
  libraryId: string;
  folderId: string | null;
  /** The library's videos changed (a video was added, or one left behind by a failed upload). */
  onUploaded: () => void;
}) {
  const { readOnly } = useSignedIn();
  const owner = useUploadOwner();
  const { running, unfinished } = useVideoUploads(owner);
  const navigate = useNavigate();
  const whereShown = useWhereShown();
  const [title, setTitle] = useState("");
  const [file, setFile] = useState<File>();
  const [uploading, setUploading] = useState<string>();
  /** The video a failed upload of the file still chosen made and left part-way: Upload continues it. */
  const [leftPartWay, setLeftPartWay] = useState<{ video: UploadedVideo; file: File }>();

  const { submit, busy, errors, formError } = useSubmit(async () => {
    if (!file) throw new Error("Choose a video file to upload.");
    const startedOn = whereShown();
    // Pressing Upload again after a failure made a second video and sent the file from its start.
    const resuming =
      leftPartWay?.file === file
        ? unfinished.find((record) => record.videoId === leftPartWay.video.videoId)
        : undefined;
    let video: UploadedVideo;
    if (leftPartWay && resuming) {
      video = leftPartWay.video;
    } else {
      // Refused before a video is made for it.
      await refuseTooLarge(file);
      const created = await call(
        api.POST("/v1/media/libraries/{libraryId}/videos", {
          params: { path: { libraryId } },
          body: { title: title || file.name, folder_id: folderId },
        }),
      );
      video = { libraryId, videoId: created.data.id, title: created.data.title };
    }
    setLeftPartWay(undefined);
    setUploading(video.videoId);
    try {
      await uploadVideoFile({ owner, video, file, resuming });
    } catch (error) {
      // The list shows what the server has: the video this attempt made is removed when none of its
      // file arrived, and listed (its upload offered for resuming) otherwise.
      let removed = false;
      if (!(error instanceof UploadFailed) || error.bytesConfirmed === 0) {
        removed = await call(
          api.DELETE("/v1/media/libraries/{libraryId}/videos/{videoId}", {
            params: { path: { libraryId, videoId: video.videoId } },
          }),
        ).then(
          () => true,
          () => false,
        );
        if (removed) forgetUnfinishedOfVideo(owner, video.videoId);
      }
      if (!removed && !(error instanceof UploadFailed && error.gone)) setLeftPartWay({ video, file });
      onUploaded();
      throw new Error(
        `${error instanceof Error ? error.message : "The upload failed."} ${
          removed
            ? `None of the file arrived, so the video “${video.title}” was not kept.`
            : `The video “${video.title}” is listed without its complete file: press Upload again to continue it from where it stopped (or choose the same file under “Unfinished uploads”).`
        }`,
      );
    } finally {
      setUploading(undefined);
    }
    onUploaded();
    // Only a person still at the form is taken to the new video; elsewhere they stay where they are.
    if (whereShown() === startedOn) navigate(`/libraries/${libraryId}/videos/${video.videoId}`);
  });
  const progress = uploading === undefined ? undefined : running.get(uploading)?.progress;
  return (
    <form noValidate onSubmit={submitting(submit)}>
      <div className="grid-2">
        <WriteFields>
          <Field label="Title" name="title" hint="The file's name when left empty" error={errors.title}>
            {(control) => (
              <input {...control} value={title} onChange={(event) => setTitle(event.target.value)} />
            )}
          </Field>
          <VideoFileField label="Video file" error={errors.file} onChange={setFile} />
        </WriteFields>
      </div>
      {progress !== undefined && <UploadProgress progress={progress} />}
      <FormError message={formError} />
      <button type="submit" className="primary" disabled={readOnly || busy}>
        {busy ? "Uploading…" : "Upload"}
      </button>
    </form>
  );
}

/**
 * The file of a video that has none yet (its upload never finished, or was lost), uploaded to that
 * video rather than to a new one.
 */
export function VideoFileForm({
  libraryId,
  videoId,
  title,
}: {
  libraryId: string;
  videoId: string;
  title: string;
}) {
  const { readOnly } = useSignedIn();
  const owner = useUploadOwner();
  const { running, elsewhere } = useVideoUploads(owner);
  const [file, setFile] = useState<File>();
  const { submit, busy, errors, formError } = useSubmit(async () => {
    if (!file) throw new Error("Choose a video file to upload.");
    await refuseTooLarge(file);
    await uploadVideoFile({ owner, video: { libraryId, videoId, title }, file });
  });
  // Any upload of this video in this tab, from here or from the library page; a resumed one shows its
  // progress under "Unfinished uploads".
  const upload = running.get(videoId);
  const uploadingElsewhere = elsewhere.has(videoId);
  return (
    <form noValidate onSubmit={submitting(submit)}>
      <WriteFields>
        <VideoFileField
          label="Video file"
          hint={uploadingElsewhere ? UPLOADING_ELSEWHERE : "This video has no file yet"}
          error={errors.file}
          disabled={upload !== undefined || uploadingElsewhere}
          onChange={setFile}
        />
      </WriteFields>
      {upload !== undefined && !upload.resumed && <UploadProgress progress={upload.progress} />}
      <FormError message={formError} />
      <button
        type="submit"
        className="primary"
        disabled={readOnly || busy || upload !== undefined || uploadingElsewhere}
      >
        {upload !== undefined ? "Uploading…" : "Upload"}
      </button>
    </form>
  );
}
