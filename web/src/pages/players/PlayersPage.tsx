import { useCallback, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { api, call, isMissing, removing } from "../../api.ts";
import { type Column, DataTable, pagingOf } from "../../components/DataTable.tsx";
import { ConfirmDialog, Dialog } from "../../components/Dialog.tsx";
import { PageHeader } from "../../components/Layout.tsx";
import { LibraryPicker } from "../../components/LibraryPicker.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import type { Player } from "../libraries/types.ts";
import { PlayerForm, PlayerPreview } from "./PlayerForm.tsx";

/** Players belong to a library: pick the library, then list, create, edit and mark its default. */
export function PlayersPage() {
  const { readOnly } = useSignedIn();
  const [params, setParams] = useSearchParams();
  const [page, setPage] = useState(1);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<Player>();
  const [deleting, setDeleting] = useState<Player>();
  const [actionError, setActionError] = useState<string>();
  const libraryId = params.get("library") ?? "";
  // Without `?library=` the newest library is shown, and named in the address (a reload keeps it).
  const showNewest = useCallback(
    (newest: string) => setParams({ library: newest }, { replace: true }),
    [setParams],
  );
  const players = useLoad(
    async () =>
      libraryId
        ? call(
            api.GET("/v1/media/libraries/{libraryId}/players", {
              params: { path: { libraryId }, query: { page, limit: 20 } },
            }),
          )
        : undefined,
    `${libraryId}|${page}`,
  );

  // An unknown or deleted library in the address: say so rather than list another library's players.
  const libraryMissing = players.state === "error" && isMissing(players.error);

  const markDefault = async (player: Player) => {
    setActionError(undefined);
    try {
      await call(
        api.PATCH("/v1/media/libraries/{libraryId}/players/{playerId}/mark-as-default", {
          params: { path: { libraryId: player.library_id, playerId: player.id } },
        }),
      );
      players.reload();
    } catch (error) {
      setActionError(error instanceof Error ? error.message : "Failed");
    }
  };

  const columns: Column<Player>[] = [
    { header: "Name", rowHeader: true, cell: (player) => player.name },
    {
      header: "Default",
      cell: (player) => (player.is_default ? <span className="badge">default</span> : ""),
    },
    { header: "Preview", cell: (player) => <PlayerPreview theme={player.theme} small /> },
    {
      header: "Actions",
      actions: true,
      cell: (player) => (
        <div className="row-actions">
          <button
            type="button"
            disabled={readOnly}
            aria-label={`Edit ${player.name}`}
            onClick={() => setEditing(player)}
          >
            Edit
          </button>
          <button
            type="button"
            disabled={readOnly || player.is_default}
            aria-label={`Mark default: ${player.name}`}
            onClick={() => markDefault(player)}
          >
            Mark default
          </button>
          <button
            type="button"
            className="danger"
            disabled={readOnly}
            aria-label={`Delete ${player.name}`}
            onClick={() => setDeleting(player)}
          >
            Delete
          </button>
        </div>
      ),
    },
  ];

  return (
    <>
      <PageHeader title="Players">
        <button
          type="button"
          className="primary"
          disabled={readOnly || !libraryId || libraryMissing}
          onClick={() => setCreating(true)}
        >
          New player
        </button>
      </PageHeader>
      <LibraryPicker
        id="player-library"
        libraryId={libraryId}
        onChoose={(chosen) => {
          setParams({ library: chosen });
          setPage(1);
        }}
        noLibraries={
          <>
            Players belong to a library: <Link to="/libraries">create a library</Link> first.
          </>
        }
        onDefault={showNewest}
      />
      {actionError && (
        <p className="field-error" role="alert">
          {actionError}
        </p>
      )}
      {libraryId && players.state === "loading" && <Loading what="Loading players" />}
      {libraryMissing ? (
        <div className="state state-error" role="alert" data-library-missing>
          <p>
            Library not found: no library of yours has the id <code>{libraryId}</code> (it may have been
            deleted). Choose a library above.
          </p>
        </div>
      ) : (
        players.state === "error" && <ErrorState error={players.error} onRetry={players.reload} />
      )}
      {players.state === "ready" &&
        players.data &&
        (players.data.data.length === 0 ? (
          <Empty>This library has no players yet.</Empty>
        ) : (
          <DataTable
            caption="Players"
            columns={columns}
            rows={players.data.data}
            rowKey={(player) => player.id}
            paging={pagingOf(players.data.meta, setPage)}
          />
        ))}
      <Dialog open={creating} title="New player" onClose={() => setCreating(false)}>
        <PlayerForm
          onCancel={() => setCreating(false)}
          onSave={async (fields) => {
            if (!libraryId) return;
            await call(
              api.POST("/v1/media/libraries/{libraryId}/players", {
                params: { path: { libraryId } },
                body: fields,
              }),
            );
            setCreating(false);
            players.reload();
          }}
        />
      </Dialog>
      <Dialog
        open={editing !== undefined}
        title={`Edit ${editing?.name ?? ""}`}
        onClose={() => setEditing(undefined)}
      >
        {editing && (
          <PlayerForm
            player={editing}
            onCancel={() => setEditing(undefined)}
            onSave={async (fields) => {
              await call(
                api.PATCH("/v1/media/libraries/{libraryId}/players/{playerId}", {
                  params: { path: { libraryId: editing.library_id, playerId: editing.id } },
                  body: fields,
                }),
              );
              setEditing(undefined);
              players.reload();
            }}
          />
        )}
      </Dialog>
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete player"
        confirmLabel="Delete player"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/media/libraries/{libraryId}/players/{playerId}", {
              params: { path: { libraryId: deleting.library_id, playerId: deleting.id } },
            }),
          );
          players.reload();
        }}
      >
        <p>
          Delete the player <strong>{deleting?.name}</strong>?
        </p>
        {deleting?.is_default && (
          <p>
            It is the library's default player: until another one is marked default, the library's videos and
            embeds show the built-in player.
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}
