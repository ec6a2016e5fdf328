import { type FormEvent, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { api, call, removing } from "../../api.ts";
import { type Column, DataTable, pagingOf } from "../../components/DataTable.tsx";
import { ConfirmDialog, Dialog } from "../../components/Dialog.tsx";
import { PageHeader } from "../../components/Layout.tsx";
import { nameApart } from "../../components/names.ts";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { useLastPageWhenPastEnd, useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { LibraryForm } from "./LibraryForm.tsx";
import type { Library } from "./types.ts";

const PRIVACY = ["public", "private", "unlisted", "restricted"] as const;
type Privacy = (typeof PRIVACY)[number];
const isPrivacy = (value: string | null): value is Privacy => PRIVACY.includes(value as Privacy);

/** Libraries with their filters and page in the address (`?search=&privacy=&page=`), kept on reload and back. */
/** The list's filters as an address gives them. */
function filtersOf(params: URLSearchParams): { search: string; privacy: Privacy | ""; page: number } {
  const privacy = params.get("privacy");
  return {
    search: params.get("search") ?? "",
    privacy: isPrivacy(privacy) ? privacy : "",
    page: Math.max(1, Number.parseInt(params.get("page") ?? "1", 10) || 1),
  };
}

export function LibrariesPage() {
  const { readOnly } = useSignedIn();
  const [params, setParams] = useSearchParams();
  const { search, privacy, page } = filtersOf(params);
  // Filters replace the address (typing is not a history entry each key); a new filter starts at page 1.
  const setFilters = (
    next: { search?: string; privacy?: Privacy | ""; page?: number },
    { replace = true }: { replace?: boolean } = {},
  ) => {
    // From the address as it is now: two changes before the next render must not undo each other.
    const values = { ...filtersOf(new URLSearchParams(window.location.search)), page: 1, ...next };
    const updated = new URLSearchParams();
    if (values.search) updated.set("search", values.search);
    if (values.privacy) updated.set("privacy", values.privacy);
    if (values.page > 1) updated.set("page", String(values.page));
    setParams(updated, { replace });
  };
  // Turning a page is a history entry: Back returns to the page before.
  const setPage = (next: number) => setFilters({ page: next }, { replace: false });
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<Library>();
  const [deleting, setDeleting] = useState<Library>();

  const libraries = useLoad(
    () =>
      call(
        api.GET("/v1/media/libraries", {
          params: {
            query: {
              page,
              limit: 20,
              ...(search ? { search } : {}),
              ...(privacy ? { default_privacy: privacy } : {}),
            },
          },
        }),
      ),
    `${page}|${search}|${privacy}`,
  );

  // The address is replaced by the last page that has rows.
  const pastEnd = useLastPageWhenPastEnd(libraries, page, (last) =>
    setFilters({ search, privacy, page: last }),
  );

  const shown = libraries.state === "ready" ? libraries.data.data : [];
  const columns: Column<Library>[] = [
    {
      header: "Name",
      rowHeader: true,
      cell: (library) => <Link to={`/libraries/${library.id}`}>{nameApart(library, shown)}</Link>,
    },
    { header: "Default privacy", cell: (library) => library.default_privacy },
    {
      header: "Status",
      cell: (library) => <span className={`status status-${library.status}`}>{library.status}</span>,
    },
    { header: "Region", cell: (library) => library.region },
    { header: "Created", cell: (library) => new Date(library.created_at).toLocaleString() },
    {
      header: "Actions",
      actions: true,
      cell: (library) => (
        <div className="row-actions">
          <button
            type="button"
            disabled={readOnly}
            onClick={() => setEditing(library)}
            aria-label={`Edit ${nameApart(library, shown)}`}
          >
            Edit
          </button>
          <button
            type="button"
            className="danger"
            disabled={readOnly}
            onClick={() => setDeleting(library)}
            aria-label={`Delete ${nameApart(library, shown)}`}
          >
            Delete
          </button>
        </div>
      ),
    },
  ];

  return (
    <>
      <PageHeader title="Libraries">
        <button type="button" className="primary" disabled={readOnly} onClick={() => setCreating(true)}>
          New library
        </button>
      </PageHeader>
      <form
        className="filters"
        aria-label="Filter libraries"
        onSubmit={(event: FormEvent) => event.preventDefault()}
      >
        <div className="field">
          <label htmlFor="library-search">Name contains</label>
          <input
            id="library-search"
            type="search"
            value={search}
            onChange={(event) => setFilters({ search: event.target.value })}
          />
        </div>
        <div className="field">
          <label htmlFor="library-privacy">Default privacy</label>
          <select
            id="library-privacy"
            value={privacy}
            onChange={(event) => setFilters({ privacy: event.target.value as Privacy | "" })}
          >
            <option value="">Any</option>
            {PRIVACY.map((value) => (
              <option key={value}>{value}</option>
            ))}
          </select>
        </div>
      </form>
      {libraries.state === "loading" && <Loading what="Loading libraries" />}
      {libraries.state === "error" && <ErrorState error={libraries.error} onRetry={libraries.reload} />}
      {pastEnd && <Loading what="Going to the last page" />}
      {libraries.state === "ready" &&
        !pastEnd &&
        (libraries.data.data.length === 0 ? (
          <Empty>
            <p>{search || privacy ? "No library matches these filters." : "No libraries yet."}</p>
          </Empty>
        ) : (
          <DataTable
            caption="Libraries"
            columns={columns}
            rows={libraries.data.data}
            rowKey={(library) => library.id}
            paging={pagingOf(libraries.data.meta, setPage)}
          />
        ))}
      <Dialog open={creating} title="New library" onClose={() => setCreating(false)}>
        <LibraryForm
          submitLabel="Create library"
          onCancel={() => setCreating(false)}
          onSave={async (fields) => {
            await call(api.POST("/v1/media/libraries", { body: fields }));
            setCreating(false);
            libraries.reload();
          }}
        />
      </Dialog>
      <Dialog
        open={editing !== undefined}
        title={`Edit ${editing?.name ?? ""}`}
        onClose={() => setEditing(undefined)}
      >
        {editing && (
          <LibraryForm
            library={editing}
            submitLabel="Save"
            onCancel={() => setEditing(undefined)}
            onSave={async ({ name, description, default_privacy }) => {
              await call(
                api.PATCH("/v1/media/libraries/{libraryId}", {
                  params: { path: { libraryId: editing.id } },
                  body: { name, description, default_privacy },
                }),
              );
              setEditing(undefined);
              libraries.reload();
            }}
          />
        )}
      </Dialog>
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete library"
        confirmLabel="Delete library"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/media/libraries/{libraryId}", { params: { path: { libraryId: deleting.id } } }),
          );
          libraries.reload();
        }}
      >
        <p>
          Delete <strong>{deleting && nameApart(deleting, shown)}</strong> with all its videos, players and
          webhooks? This cannot be undone.
        </p>
      </ConfirmDialog>
    </>
  );
}
