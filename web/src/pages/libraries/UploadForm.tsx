import { useEffect, useRef, useState } from "react";
import { useLocation, useNavigate } from "react-router";
import type { DetailedError } from "tus-js-client";
import { ApiFailure, api, call } from "../../api.ts";
import { Field, FormError } from "../../components/Field.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useSignedIn } from "../../session.tsx";

/** A size in the words of a file manager: "2 GB", "1.5 MB" (binary multiples, as they count). */
export function sizeInWords(bytes: number): string {
  const units = ["bytes", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const shown = unit === 0 ? String(value) : String(Math.round(value * 10) / 10);
  return `${shown} ${units[unit]}`;
}

/**
 * The largest source the server takes, from the tus endpoint's `Tus-Max-Size` (its OPTIONS answer
 * needs no authentication); `undefined` when it cannot be read (the server still refuses with 413).
 */
let maxSize: Promise<number | undefined> | undefined;
function maxUploadBytes(): Promise<number | undefined> {
  maxSize ??= api.OPTIONS("/v1/media/tus").then(
    ({ response }) => {
      const value = Number(response.headers.get("tus-max-size"));
      return Number.isSafeInteger(value) && value > 0 ? value : undefined;
    },
    () => undefined,
  );
  const asked = maxSize;
  // A failed read is asked again next time.
  asked.then((value) => {
    if (value === undefined && maxSize === asked) maxSize = undefined;
  });
  return asked;
}

const tooLarge = (limit: number | undefined) =>
  limit === undefined
    ? "The file is larger than the server accepts."
    : `The file is larger than the ${sizeInWords(limit)} limit.`;

/** What a failed tus upload means to the person uploading, in place of tus-js-client's own text. */
function uploadFailure(error: Error | DetailedError, limit: number | undefined): string {
  const detailed = error as Partial<DetailedError>;
  const status = detailed.originalResponse?.getStatus();
  if (!status) {
    return detailed.originalRequest
      ? "The connection to the server was lost during the upload. Check your network and try again."
      : "The file could not be read for the upload. Choose it again and retry.";
  }
  if (status === 413) return tooLarge(limit);
  if (status === 401 || status === 403) {
    return "The server refused the upload: its authorization expired or is not valid. Try again.";
  }
  if (status === 404 || status === 410) {
    return "The upload is no longer on the server (it expired or was removed). Try again.";
  }
  if (status === 409) return "The upload got out of step with the server. Try again.";
  if (status === 429) return "Too many uploads at once. Wait a moment and try again.";
  if (status >= 500) return `The server could not take the file (error ${status}). Try again later.`;
  return `The server refused the upload (error ${status}).`;
}

/** Uploads in progress in this tab, whichever page is shown: leaving or reloading the tab asks first. */
let uploadsRunning = 0;
const askBeforeLeaving = (event: BeforeUnloadEvent) => {
  event.preventDefault();
  // Older browsers ask only when a return value is set.
  event.returnValue = "";
};
function uploadStarted() {
  uploadsRunning += 1;
  if (uploadsRunning === 1) window.addEventListener("beforeunload", askBeforeLeaving);
}
function uploadEnded() {
  uploadsRunning -= 1;
  if (uploadsRunning === 0) window.removeEventListener("beforeunload", askBeforeLeaving);
}

/**
 * Creates a video and uploads its source with tus (with progress), authorized by a signed upload
 * authorization the API gives for that one video: the browser never holds an API key.
 *
 * An upload goes on when the person leaves the form for another page of the console (the video then
 * appears in its library's list; nobody is taken to it), and closing or reloading the tab meanwhile
 * asks first. A failed upload whose bytes the server never confirmed deletes the video it created.
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
  const navigate = useNavigate();
  const location = useLocation();
  const [title, setTitle] = useState("");
  const [file, setFile] = useState<File>();
  const [progress, setProgress] = useState<number>();
  const [limit, setLimit] = useState<number>();
  // Where the person is now: an upload that ends elsewhere does not take them to its video.
  const shown = useRef({ mounted: true, pathname: location.pathname });
  shown.current.pathname = location.pathname;
  useEffect(() => {
    shown.current.mounted = true;
    let current = true;
    maxUploadBytes().then((value) => current && setLimit(value));
    return () => {
      current = false;
      shown.current.mounted = false;
    };
  }, []);
  const tooLargeFor = (chosen: File | undefined, max: number | undefined) =>
    chosen && max !== undefined && chosen.size > max ? tooLarge(max) : undefined;

  const { submit, busy, errors, formError } = useSubmit(async () => {
    if (!file) throw new Error("Choose a video file to upload.");
    // Refused before a video is made for it.
    const max = await maxUploadBytes();
    const refusal = tooLargeFor(file, max);
    if (refusal) throw new ApiFailure(413, refusal, { file: refusal }, undefined);
    const startedOn = shown.current.pathname;
    const created = await call(
      api.POST("/v1/media/libraries/{libraryId}/videos", {
        params: { path: { libraryId } },
        body: { title: title || file.name, folder_id: folderId },
      }),
    );
    const videoId = created.data.id;
    uploadStarted();
    let confirmedBytes = 0;
    try {
      const authorization = await call(
        api.POST("/v1/media/libraries/{libraryId}/videos/{videoId}/upload-authorization", {
          params: { path: { libraryId, videoId } },
          body: { expires_in_s: 6 * 3600 },
        }),
      );
      const { Upload } = await import("tus-js-client");
      setProgress(0);
      await new Promise<void>((resolve, reject) => {
        const upload = new Upload(file, {
          endpoint: new URL(authorization.data.endpoint, window.location.origin).toString(),
          headers: { ...authorization.data.headers },
          metadata: { filename: file.name, filetype: file.type },
          chunkSize: 8 * 1024 * 1024,
          retryDelays: [0, 1000, 3000],
          // Each attempt is a new video: nothing to resume, so nothing is kept in localStorage.
          storeFingerprintForResuming: false,
          onProgress: (sent, total) => setProgress(total > 0 ? sent / total : 0),
          onChunkComplete: (_chunk, accepted) => {
            confirmedBytes = accepted;
          },
          onError: (error) => {
            console.warn("The upload failed:", error);
            reject(new Error(uploadFailure(error, max)));
          },
          onSuccess: () => resolve(),
        });
        upload.start();
      });
    } catch (error) {
      setProgress(undefined);
      // The list shows what the server has: the video this attempt made is removed when none of its
      // file arrived, and listed (without a complete file) otherwise.
      let removed = false;
      if (confirmedBytes === 0) {
        removed = await call(
          api.DELETE("/v1/media/libraries/{libraryId}/videos/{videoId}", {
            params: { path: { libraryId, videoId } },
          }),
        ).then(
          () => true,
          () => false,
        );
      }
      onUploaded();
      const name = created.data.title;
      throw new Error(
        `${error instanceof Error ? error.message : "The upload failed."} ${
          removed
            ? `None of the file arrived, so the video “${name}” was not kept.`
            : `The video “${name}” is listed without its complete file: delete it and upload again.`
        }`,
      );
    } finally {
      uploadEnded();
    }
    onUploaded();
    // Only a person still at the form is taken to the new video; elsewhere they stay where they are.
    if (shown.current.mounted && shown.current.pathname === startedOn) {
      navigate(`/libraries/${libraryId}/videos/${videoId}`);
    }
  });
  const fileError = errors.file ?? tooLargeFor(file, limit);
  return (
    <form noValidate onSubmit={submitting(submit)}>
      <div className="grid-2">
        <Field label="Title" name="title" hint="The file's name when left empty" error={errors.title}>
          {(control) => (
            <input
              {...control}
              value={title}
              disabled={readOnly}
              onChange={(event) => setTitle(event.target.value)}
            />
          )}
        </Field>
        <Field
          label="Video file"
          name="file"
          hint={limit === undefined ? undefined : `At most ${sizeInWords(limit)}`}
          error={fileError}
        >
          {(control) => (
            <input
              {...control}
              type="file"
              accept="video/*"
              disabled={readOnly}
              onChange={(event) => setFile(event.target.files?.[0])}
            />
          )}
        </Field>
      </div>
      {progress !== undefined && (
        <div className="field">
          <label htmlFor="upload-progress">Upload progress</label>
          <progress id="upload-progress" className="progress" max={1} value={progress}>
            {Math.round(progress * 100)}%
          </progress>
          <span aria-live="polite">{Math.round(progress * 100)}%</span>
        </div>
      )}
      <FormError message={formError} />
      <button type="submit" className="primary" disabled={readOnly || busy}>
        {busy ? "Uploading…" : "Upload"}
      </button>
    </form>
  );
}
