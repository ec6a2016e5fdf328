import { useState } from "react";
import { api, call, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { ConfirmDialog, Dialog } from "../../components/Dialog.tsx";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import type { Subtitle } from "./types.ts";

interface SubtitleFields {
  title: string;
  language: string;
  file?: File | undefined;
}

/**
 * The multipart body of a subtitle. Title and language are always sent, even empty, so an emptied
 * field comes back as the API's validation error instead of silently keeping the old value.
 */
function subtitleForm(fields: SubtitleFields): FormData {
  const form = new FormData();
  form.append("title", fields.title);
  form.append("language", fields.language);
  if (fields.file) form.append("file", fields.file);
  return form;
}

function SubtitleForm({
  subtitle,
  onSave,
  onCancel,
}: {
  subtitle?: Subtitle;
  onSave: (fields: SubtitleFields) => Promise<void>;
  onCancel: () => void;
}) {
  const [title, setTitle] = useState(subtitle?.title ?? "");
  const [language, setLanguage] = useState(subtitle?.language ?? "");
  const [file, setFile] = useState<File>();
  const { submit, busy, errors, formError } = useSubmit(() => onSave({ title, language, file }));
  return (
    <form noValidate onSubmit={submitting(submit)}>
      <Field label="Title" name="title" error={errors.title}>
        {(control) => (
          <input {...control} required value={title} onChange={(event) => setTitle(event.target.value)} />
        )}
      </Field>
      <Field label="Language" name="language" hint="A BCP 47 tag, e.g. en or pt-BR" error={errors.language}>
        {(control) => (
          <input
            {...control}
            required
            value={language}
            onChange={(event) => setLanguage(event.target.value)}
          />
        )}
      </Field>
      <Field
        label={subtitle ? "Replace the file (WebVTT or SRT)" : "File (WebVTT or SRT)"}
        name="file"
        error={errors.file}
      >
        {(control) => (
          <input
            {...control}
            type="file"
            accept=".vtt,.srt,text/vtt"
            onChange={(event) => setFile(event.target.files?.[0])}
          />
        )}
      </Field>
      <OtherErrors errors={errors} shown={["title", "language", "file"]} />
      <FormError message={formError} />
      <div className="dialog-actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="primary" disabled={busy}>
          Save subtitle
        </button>
      </div>
    </form>
  );
}

export function Subtitles({ libraryId, videoId }: { libraryId: string; videoId: string }) {
  const { readOnly } = useSignedIn();
  const path = { libraryId, videoId };
  const subtitles = useLoad(
    () =>
      call(
        api.GET("/v1/media/libraries/{libraryId}/videos/{videoId}/subtitles", {
          params: { path, query: { page: 1, limit: 100 } },
        }),
      ),
    videoId,
  );
  const [adding, setAdding] = useState(false);
  const [editing, setEditing] = useState<Subtitle>();
  const [deleting, setDeleting] = useState<Subtitle>();
  const columns: Column<Subtitle>[] = [
    { header: "Title", rowHeader: true, cell: (subtitle) => subtitle.title },
    { header: "Language", cell: (subtitle) => subtitle.language },
    {
      header: "Actions",
      actions: true,
      cell: (subtitle) => (
        <div className="row-actions">
          <button
            type="button"
            disabled={readOnly}
            aria-label={`Edit ${subtitle.title}`}
            onClick={() => setEditing(subtitle)}
          >
            Edit
          </button>
          <button
            type="button"
            className="danger"
            disabled={readOnly}
            aria-label={`Delete ${subtitle.title}`}
            onClick={() => setDeleting(subtitle)}
          >
            Delete
          </button>
        </div>
      ),
    },
  ];
  return (
    <>
      {subtitles.state === "loading" && <Loading what="Loading subtitles" />}
      {subtitles.state === "error" && <ErrorState error={subtitles.error} onRetry={subtitles.reload} />}
      {subtitles.state === "ready" &&
        (subtitles.data.data.length === 0 ? (
          <Empty>No subtitles yet.</Empty>
        ) : (
          <DataTable
            caption="Subtitles"
            columns={columns}
            rows={subtitles.data.data}
            rowKey={(subtitle) => subtitle.id}
          />
        ))}
      <button type="button" disabled={readOnly} onClick={() => setAdding(true)}>
        Add subtitle
      </button>
      <Dialog open={adding} title="Add subtitle" onClose={() => setAdding(false)}>
        <SubtitleForm
          onCancel={() => setAdding(false)}
          onSave={async (fields) => {
            await call(
              api.POST("/v1/media/libraries/{libraryId}/videos/{videoId}/subtitles", {
                params: { path },
                body: { title: fields.title, language: fields.language, file: "" },
                bodySerializer: () => subtitleForm(fields),
              }),
            );
            setAdding(false);
            subtitles.reload();
          }}
        />
      </Dialog>
      <Dialog open={editing !== undefined} title="Edit subtitle" onClose={() => setEditing(undefined)}>
        {editing && (
          <SubtitleForm
            subtitle={editing}
            onCancel={() => setEditing(undefined)}
            onSave={async (fields) => {
              await call(
                api.PUT("/v1/media/libraries/{libraryId}/videos/{videoId}/subtitles/{subtitleId}", {
                  params: { path: { ...path, subtitleId: editing.id } },
                  body: {},
                  bodySerializer: () => subtitleForm(fields),
                }),
              );
              setEditing(undefined);
              subtitles.reload();
            }}
          />
        )}
      </Dialog>
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete subtitle"
        confirmLabel="Delete subtitle"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/media/libraries/{libraryId}/videos/{videoId}/subtitles/{subtitleId}", {
              params: { path: { ...path, subtitleId: deleting.id } },
            }),
          );
          subtitles.reload();
        }}
      >
        <p>
          Delete the subtitle <strong>{deleting?.title}</strong>?
        </p>
      </ConfirmDialog>
    </>
  );
}
