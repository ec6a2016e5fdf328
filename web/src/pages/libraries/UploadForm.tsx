import { useState } from "react";
import { useNavigate } from "react-router";
import { api, call } from "../../api.ts";
import { Field, FormError } from "../../components/Field.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useSignedIn } from "../../session.tsx";

/**
 * Creates a video and uploads its source with tus (resumable, with progress), authorized by a signed
 * upload authorization the API gives for that one video: the browser never holds an API key.
 */
export function UploadForm({
  libraryId,
  folderId,
  onUploaded,
}: {
  libraryId: string;
  folderId: string | null;
  onUploaded: () => void;
}) {
  const { readOnly } = useSignedIn();
  const navigate = useNavigate();
  const [title, setTitle] = useState("");
  const [file, setFile] = useState<File>();
  const [progress, setProgress] = useState<number>();
  const { submit, busy, errors, formError } = useSubmit(async () => {
    if (!file) throw new Error("Choose a video file to upload.");
    const created = await call(
      api.POST("/v1/media/libraries/{libraryId}/videos", {
        params: { path: { libraryId } },
        body: { title: title || file.name, folder_id: folderId },
      }),
    );
    const videoId = created.data.id;
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
        onProgress: (sent, total) => setProgress(total > 0 ? sent / total : 0),
        onError: (error) => reject(new Error(`The upload failed: ${error.message}`)),
        onSuccess: () => resolve(),
      });
      upload.start();
    });
    onUploaded();
    navigate(`/libraries/${libraryId}/videos/${videoId}`);
  });
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
        <Field label="Video file" name="file" error={errors.file}>
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
