import { useState } from "react";
import { api, call, removing } from "../../api.ts";
import { ConfirmDialog } from "../../components/Dialog.tsx";
import { Field } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import type { Folder } from "./types.ts";

/** Every folder of the library, page by page (the API pages at most 100 at a time). */
async function allFolders(libraryId: string): Promise<Folder[]> {
  const folders: Folder[] = [];
  for (let page = 1; ; page++) {
    const body = await call(
      api.GET("/v1/media/libraries/{libraryId}/folders", {
        params: { path: { libraryId }, query: { page, limit: 100 } },
      }),
    );
    folders.push(...body.data);
    if (page >= body.meta.pagination.total_pages) return folders;
  }
}

interface FolderTreeProps {
  libraryId: string;
  selected: string | null;
  onSelect: (folderId: string | null) => void;
}

/** The folders as a tree (a list of lists); choosing one shows its videos and puts uploads there. */
export function FolderTree({ libraryId, selected, onSelect }: FolderTreeProps) {
  const { readOnly } = useSignedIn();
  const folders = useLoad(() => allFolders(libraryId), libraryId);
  const [name, setName] = useState("");
  const [deleting, setDeleting] = useState<Folder>();
  const create = useSubmit(async () => {
    await call(
      api.POST("/v1/media/libraries/{libraryId}/folders", {
        params: { path: { libraryId } },
        body: { name, parent_id: selected },
      }),
    );
    setName("");
    folders.reload();
  });

  if (folders.state === "loading") return <Loading what="Loading folders" />;
  if (folders.state === "error") return <ErrorState error={folders.error} onRetry={folders.reload} />;
  const children = (parent: string | null) => folders.data.filter((folder) => folder.parent_id === parent);
  const selectedFolder = folders.data.find((folder) => folder.id === selected);

  const branch = (parent: string | null) => {
    const items = children(parent);
    if (items.length === 0) return null;
    return (
      <ul>
        {items.map((folder) => (
          <li key={folder.id}>
            <button
              type="button"
              className="linklike"
              aria-current={folder.id === selected ? "true" : undefined}
              onClick={() => onSelect(folder.id)}
            >
              {folder.name}
            </button>
            {branch(folder.id)}
          </li>
        ))}
      </ul>
    );
  };

  return (
    <div className="folder-tree">
      <nav aria-label="Folders">
        <ul>
          <li>
            <button
              type="button"
              className="linklike"
              aria-current={selected === null ? "true" : undefined}
              onClick={() => onSelect(null)}
            >
              All videos
            </button>
            {branch(null)}
          </li>
        </ul>
      </nav>
      {folders.data.length === 0 && <Empty>No folders yet.</Empty>}
      <form onSubmit={submitting(create.submit)}>
        <WriteFields>
          <Field
            label={selectedFolder ? `New folder in ${selectedFolder.name}` : "New folder"}
            name="name"
            error={create.errors.name ?? create.errors.parent_id ?? create.formError}
          >
            {(control) => (
              <input {...control} value={name} onChange={(event) => setName(event.target.value)} />
            )}
          </Field>
        </WriteFields>
        <div className="row-actions">
          <button type="submit" disabled={readOnly || create.busy}>
            Add folder
          </button>
          {selectedFolder && (
            <button
              type="button"
              className="danger"
              disabled={readOnly}
              onClick={() => setDeleting(selectedFolder)}
            >
              Delete folder
            </button>
          )}
        </div>
      </form>
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete folder"
        confirmLabel="Delete folder"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/media/libraries/{libraryId}/folders/{folderId}", {
              params: { path: { libraryId, folderId: deleting.id } },
            }),
          );
          onSelect(null);
          folders.reload();
        }}
      >
        <p>
          Delete the folder <strong>{deleting?.name}</strong>?
        </p>
      </ConfirmDialog>
    </div>
  );
}
