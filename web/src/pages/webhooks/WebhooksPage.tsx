import type { paths } from "@cumulo/client";
import "./webhooks.css";
import { useCallback, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { api, call, removing } from "../../api.ts";
import { useNowRenewedAt } from "../../clock.ts";
import { type Column, DataTable, pagingOf } from "../../components/DataTable.tsx";
import { DateTime } from "../../components/DateTime.tsx";
import { ConfirmDialog, SecretDialog } from "../../components/Dialog.tsx";
import { PageHeader } from "../../components/Layout.tsx";
import { LibraryPicker } from "../../components/LibraryPicker.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { WrapPoints } from "../../components/WrapPoints.tsx";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { Deliveries } from "./Deliveries.tsx";
import { EndpointDialog, eventsInWords } from "./EndpointDialog.tsx";
import { RotateDialog } from "./RotateDialog.tsx";

type EndpointList =
  paths["/v1/media/libraries/{libraryId}/webhooks"]["get"]["responses"][200]["content"]["application/json"];
export type Endpoint = EndpointList["data"][number];

/** Webhook endpoints belong to a library: the page picks one (kept in `?library=`), then its endpoints. */
export function WebhooksPage() {
  const [params, setParams] = useSearchParams();
  const libraryId = params.get("library") ?? "";
  const endpointId = params.get("endpoint") ?? "";
  const choose = (next: { library?: string; endpoint?: string }) => {
    const updated = new URLSearchParams();
    const library = next.library ?? libraryId;
    if (library) updated.set("library", library);
    if (next.endpoint) updated.set("endpoint", next.endpoint);
    setParams(updated);
  };
  // An organization with one library has nothing to choose: it is shown, and named in the address
  // (a replace, as the players page does with the newest).
  const showOnly = useCallback(
    (only: string) => setParams({ library: only }, { replace: true }),
    [setParams],
  );

  return (
    <>
      <PageHeader title="Webhooks" />
      <section className="panel" aria-labelledby="webhook-library-title">
        <h2 id="webhook-library-title">Library</h2>
        <LibraryPicker
          id="webhook-library"
          libraryId={libraryId}
          onChoose={(library) => choose({ library })}
          noLibraries={
            <>
              There are no libraries yet: <Link to="/libraries">create one</Link> first.
            </>
          }
          placeholder="Choose a library…"
          onOnlyLibrary={showOnly}
        />
      </section>
      {libraryId && (
        <Endpoints
          key={libraryId}
          libraryId={libraryId}
          selected={endpointId}
          onSelect={(endpoint) => choose({ endpoint })}
        />
      )}
    </>
  );
}

interface EndpointsProps {
  libraryId: string;
  selected: string;
  onSelect: (endpointId: string) => void;
}

function Endpoints({ libraryId, selected, onSelect }: EndpointsProps) {
  const { readOnly } = useSignedIn();
  const [page, setPage] = useState(1);
  const endpoints = useLoad(
    () =>
      call(
        api.GET("/v1/media/libraries/{libraryId}/webhooks", {
          params: { path: { libraryId }, query: { page, limit: 20 } },
        }),
      ),
    `${libraryId}:${page}`,
  );
  const [editing, setEditing] = useState<Endpoint | "new">();
  const [deleting, setDeleting] = useState<Endpoint>();
  const [rotating, setRotating] = useState<Endpoint>();
  const [secret, setSecret] = useState<{ title: string; value: string }>();
  // How many times a Deliveries button was used: each time, the delivery log is brought into view.
  const [deliveriesOpened, setDeliveriesOpened] = useState(0);
  const { reload } = endpoints;
  // The list names a previous secret only while it is accepted: once its time passes, the cell says so.
  const now = useNowRenewedAt(
    endpoints.data?.data.map((endpoint) => endpoint.previous_secret_expires_at) ?? [],
  );

  const columns: Column<Endpoint>[] = [
    { header: "Name", cell: (endpoint) => endpoint.name, rowHeader: true },
    {
      header: "URL",
      cell: (endpoint) => (
        <span className="mono break">
          <WrapPoints text={endpoint.url} />
        </span>
      ),
    },
    { header: "Events", cell: (endpoint) => eventsInWords(endpoint.events) },
    {
      header: "Active",
      cell: (endpoint) => (
        <span className={endpoint.is_active ? "status status-ready" : "status"}>
          {endpoint.is_active ? "active" : "paused"}
        </span>
      ),
    },
    {
      header: "Previous secret",
      cell: (endpoint) =>
        endpoint.previous_secret_expires_at && Date.parse(endpoint.previous_secret_expires_at) > now ? (
          <>
            Accepted until <DateTime value={endpoint.previous_secret_expires_at} />
          </>
        ) : (
          <span className="muted">—</span>
        ),
    },
    {
      header: "Actions",
      actions: true,
      cell: (endpoint) => (
        <div className="row-actions">
          <button
            type="button"
            aria-pressed={selected === endpoint.id}
            aria-label={`Deliveries of ${endpoint.name}`}
            onClick={() => {
              onSelect(endpoint.id);
              setDeliveriesOpened((count) => count + 1);
            }}
          >
            Deliveries
          </button>
          <button
            type="button"
            disabled={readOnly}
            aria-label={`Edit ${endpoint.name}`}
            onClick={() => setEditing(endpoint)}
          >
            Edit
          </button>
          <button
            type="button"
            disabled={readOnly}
            aria-label={`Rotate secret of ${endpoint.name}`}
            onClick={() => setRotating(endpoint)}
          >
            Rotate secret
          </button>
          <button
            type="button"
            className="danger"
            disabled={readOnly}
            aria-label={`Delete ${endpoint.name}`}
            onClick={() => setDeleting(endpoint)}
          >
            Delete
          </button>
        </div>
      ),
    },
  ];

  const selectedEndpoint = endpoints.data?.data.find((endpoint) => endpoint.id === selected);

  return (
    <>
      <section className="panel" aria-labelledby="webhook-endpoints-title">
        <div className="page-header">
          <h2 id="webhook-endpoints-title">Endpoints</h2>
          <button type="button" className="primary" disabled={readOnly} onClick={() => setEditing("new")}>
            Add endpoint
          </button>
        </div>
        {endpoints.state === "loading" && <Loading what="Loading endpoints" />}
        {endpoints.state === "error" && <ErrorState error={endpoints.error} onRetry={reload} />}
        {endpoints.state === "ready" &&
          (endpoints.data.data.length === 0 ? (
            <Empty>
              <p>
                This library sends no webhooks yet.
                {/* A read-only user is not asked to use a button they cannot. */}
                {!readOnly && " Add an endpoint to receive its video events."}
              </p>
            </Empty>
          ) : (
            <DataTable
              caption="Webhook endpoints"
              columns={columns}
              rows={endpoints.data.data}
              rowKey={(endpoint) => endpoint.id}
              paging={pagingOf(endpoints.data.meta, setPage)}
            />
          ))}
      </section>
      {selectedEndpoint && (
        <Deliveries
          key={selectedEndpoint.id}
          libraryId={libraryId}
          endpoint={selectedEndpoint}
          opened={deliveriesOpened}
        />
      )}
      <EndpointDialog
        libraryId={libraryId}
        endpoint={editing}
        onClose={() => setEditing(undefined)}
        onSaved={(saved, created) => {
          setEditing(undefined);
          reload();
          if (created && saved.secret) setSecret({ title: `Secret of ${saved.name}`, value: saved.secret });
        }}
      />
      <RotateDialog
        libraryId={libraryId}
        endpoint={rotating}
        onClose={() => setRotating(undefined)}
        onRotated={(rotated) => {
          setRotating(undefined);
          reload();
          setSecret({ title: `New secret of ${rotated.name}`, value: rotated.secret });
        }}
      />
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete endpoint"
        confirmLabel="Delete endpoint"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/media/libraries/{libraryId}/webhooks/{endpointId}", {
              params: { path: { libraryId, endpointId: deleting.id } },
            }),
          );
          if (deleting.id === selected) onSelect("");
          reload();
        }}
      >
        <p>
          Delete <strong>{deleting?.name}</strong>? It receives no more events.
        </p>
      </ConfirmDialog>
      <SecretDialog
        open={secret !== undefined}
        title={secret?.title ?? ""}
        label="Signing secret"
        secret={secret?.value ?? ""}
        onClose={() => setSecret(undefined)}
      />
    </>
  );
}
