import type { paths } from "@cumulo/client";
import { useEffect, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { api, call, removing } from "../../api.ts";
import { type Column, DataTable, pagingOf } from "../../components/DataTable.tsx";
import { DateTime } from "../../components/DateTime.tsx";
import { ConfirmDialog, Dialog } from "../../components/Dialog.tsx";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { WrapPoints } from "../../components/WrapPoints.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { Purges } from "./Purges.tsx";

type DistributionList =
  paths["/v1/cdn/distributions"]["get"]["responses"][200]["content"]["application/json"];
export type Distribution = DistributionList["data"][number];

/**
 * The library a distribution belongs to, from its origin (`media://{library id}`): the API made it
 * with the library, keeps its origin and deletes it only with the library.
 */
export const libraryOf = (distribution: Distribution): string | undefined =>
  distribution.origin_url.startsWith("media://")
    ? distribution.origin_url.slice("media://".length)
    : undefined;

const TTL_UNITS = [
  { seconds: 86_400, name: "day" },
  { seconds: 3_600, name: "hour" },
  { seconds: 60, name: "minute" },
  { seconds: 1, name: "second" },
] as const;

/** A TTL in words, "1 day" or "1 hour 30 minutes", rather than "86400 s" for the reader to divide. */
export function ttlInWords(seconds: number): string {
  if (seconds === 0) return "0 seconds";
  let rest = seconds;
  const parts: string[] = [];
  for (const unit of TTL_UNITS) {
    const count = Math.floor(rest / unit.seconds);
    rest -= count * unit.seconds;
    if (count > 0) parts.push(`${count.toLocaleString()} ${unit.name}${count === 1 ? "" : "s"}`);
  }
  return parts.join(" ");
}

/** The names of these libraries by id; a library that cannot be read (deleted meanwhile) is left out. */
async function libraryNames(ids: string[]): Promise<Map<string, string>> {
  const found = await Promise.all(
    ids.map((libraryId) =>
      call(api.GET("/v1/media/libraries/{libraryId}", { params: { path: { libraryId } } })).then(
        (body) => [libraryId, body.data.name] as const,
        () => undefined,
      ),
    ),
  );
  return new Map(found.filter((entry) => entry !== undefined));
}

/** The organization's distributions; the one chosen (`?distribution=`) shows its purge form and history. */
export function Distributions() {
  const { readOnly } = useSignedIn();
  const [params, setParams] = useSearchParams();
  const selected = params.get("distribution") ?? "";
  const [page, setPage] = useState(1);
  const distributions = useLoad(
    () => call(api.GET("/v1/cdn/distributions", { params: { query: { page, limit: 20 } } })),
    `${page}`,
  );
  const [editing, setEditing] = useState<Distribution | "new">();
  const [deleting, setDeleting] = useState<Distribution>();
  const { reload } = distributions;
  const select = (id: string) => setParams(id ? { distribution: id } : {});
  // How many times a Purges button was used: each time, the purge panel is brought into view.
  const [purgesOpened, setPurgesOpened] = useState(0);
  const libraryIds = [
    ...new Set((distributions.data?.data ?? []).flatMap((row) => libraryOf(row) ?? [])),
  ].sort();
  const libraries = useLoad(() => libraryNames(libraryIds), libraryIds.join(","));

  const columns: Column<Distribution>[] = [
    {
      header: "Host name",
      rowHeader: true,
      cell: (row) => {
        const libraryId = libraryOf(row);
        return (
          <>
            <span className="mono">
              <WrapPoints text={row.hostname} />
            </span>
            {libraryId && (
              <small className="managed-by">
                Managed by the library{" "}
                <Link to={`/libraries/${libraryId}`}>{libraries.data?.get(libraryId) ?? libraryId}</Link>{" "}
                (deleted with it; its origin cannot change)
              </small>
            )}
          </>
        );
      },
    },
    {
      header: "Origin",
      cell: (row) => (
        <span className="mono break">
          <WrapPoints text={row.origin_url} />
        </span>
      ),
    },
    {
      header: "Default TTL",
      cell: (row) => (
        <span title={`${row.default_ttl_s.toLocaleString()} seconds`}>{ttlInWords(row.default_ttl_s)}</span>
      ),
    },
    {
      header: "Status",
      cell: (row) => (
        <>
          <span className={row.status === "active" ? "status status-ready" : "status"}>{row.status}</span>
          {row.hostname_verification?.status === "pending" && (
            <PendingHostname
              distribution={row}
              verification={row.hostname_verification}
              onVerified={reload}
            />
          )}
        </>
      ),
    },
    {
      header: "Actions",
      actions: true,
      cell: (row) => (
        <div className="row-actions">
          <button
            type="button"
            aria-pressed={selected === row.id}
            aria-label={`Purges of ${row.hostname}`}
            onClick={() => {
              select(row.id);
              setPurgesOpened((count) => count + 1);
            }}
          >
            Purges
          </button>
          <button
            type="button"
            disabled={readOnly}
            aria-label={`Edit ${row.hostname}`}
            onClick={() => setEditing(row)}
          >
            Edit
          </button>
          {/* The API refuses to delete a library's distribution (409): it goes with its library. */}
          {!libraryOf(row) && (
            <button
              type="button"
              className="danger"
              disabled={readOnly}
              aria-label={`Delete ${row.hostname}`}
              onClick={() => setDeleting(row)}
            >
              Delete
            </button>
          )}
        </div>
      ),
    },
  ];
  const chosen = distributions.data?.data.find((row) => row.id === selected);

  return (
    <>
      <section className="panel" aria-labelledby="cdn-distributions-title">
        <div className="page-header">
          <h2 id="cdn-distributions-title">Distributions</h2>
          <button type="button" className="primary" disabled={readOnly} onClick={() => setEditing("new")}>
            Add distribution
          </button>
        </div>
        {distributions.state === "loading" && <Loading what="Loading distributions" />}
        {distributions.state === "error" && <ErrorState error={distributions.error} onRetry={reload} />}
        {distributions.state === "ready" &&
          (distributions.data.data.length === 0 ? (
            <Empty>
              <p>
                No distribution yet.
                {/* A read-only user is not asked to use a button they cannot. */}
                {!readOnly && " Add one to serve an origin through the Cumulo edge."}
              </p>
            </Empty>
          ) : (
            <DataTable
              caption="CDN distributions"
              columns={columns}
              rows={distributions.data.data}
              rowKey={(row) => row.id}
              paging={pagingOf(distributions.data.meta, setPage)}
            />
          ))}
      </section>
      {chosen && <Purges key={chosen.id} distribution={chosen} opened={purgesOpened} />}
      <DistributionDialog
        distribution={editing}
        onClose={() => setEditing(undefined)}
        onSaved={() => {
          setEditing(undefined);
          reload();
        }}
      />
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete distribution"
        confirmLabel="Delete distribution"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/cdn/distributions/{distributionID}", {
              params: { path: { distributionID: deleting.id } },
            }),
          );
          if (deleting.id === selected) select("");
          reload();
        }}
      >
        <p>
          Delete <strong>{deleting && <WrapPoints text={deleting.hostname} />}</strong>? The edge stops
          serving it at once; its past traffic stays in the analytics.
        </p>
      </ConfirmDialog>
    </>
  );
}

type HostnameVerification = NonNullable<Distribution["hostname_verification"]>;

/**
 * A host name not verified yet (the operator turned verification on): the edge serves it path-style
 * only until the TXT record shown is in DNS and verified.
 */
function PendingHostname({
  distribution,
  verification,
  onVerified,
}: {
  distribution: Distribution;
  verification: HostnameVerification;
  onVerified: () => void;
}) {
  const { readOnly } = useSignedIn();
  const { submit, busy, formError } = useSubmit(async () => {
    await call(
      api.POST("/v1/cdn/distributions/{distributionID}/hostname-verification", {
        params: { path: { distributionID: distribution.id } },
      }),
    );
    onVerified();
  });
  return (
    <div className="hostname-pending">
      <small className="managed-by">
        Not verified: served only path-style until this DNS record proves the name is yours.
      </small>
      <dl>
        <dt>{verification.record_type} record</dt>
        <dd className="mono break">
          <WrapPoints text={verification.record_name} />
        </dd>
        <dt>Value</dt>
        <dd className="mono break">{verification.record_value}</dd>
        {verification.expires_at && (
          <>
            <dt title="From then on another organization may take the name">Claim expires</dt>
            <dd>
              <DateTime value={verification.expires_at} />
            </dd>
          </>
        )}
      </dl>
      <button
        type="button"
        disabled={readOnly || busy}
        aria-label={`Verify ${distribution.hostname}`}
        onClick={() => void submit()}
      >
        Verify
      </button>
      <FormError message={formError} />
    </div>
  );
}

interface DistributionDialogProps {
  distribution: Distribution | "new" | undefined;
  onClose: () => void;
  onSaved: () => void;
}

function DistributionDialog({ distribution, onClose, onSaved }: DistributionDialogProps) {
  const existing = distribution === "new" ? undefined : distribution;
  // A library's distribution keeps the origin the library gave it (the API answers 409 to a change).
  const fixedOrigin = existing !== undefined && libraryOf(existing) !== undefined;
  const [hostname, setHostname] = useState("");
  const [origin, setOrigin] = useState("");
  const [ttl, setTtl] = useState("");
  const [active, setActive] = useState(true);
  const { submit, busy, errors, formError, reset } = useSubmit(async () => {
    // An empty TTL leaves the server's default (new) or the current value (edit).
    const defaultTtl = ttl.trim() === "" ? {} : { default_ttl_s: Number(ttl) };
    if (existing) {
      await call(
        api.PATCH("/v1/cdn/distributions/{distributionID}", {
          params: { path: { distributionID: existing.id } },
          body: {
            ...(fixedOrigin ? {} : { origin_url: origin }),
            status: active ? "active" : "disabled",
            ...defaultTtl,
          },
        }),
      );
    } else {
      await call(
        api.POST("/v1/cdn/distributions", { body: { hostname, origin_url: origin, ...defaultTtl } }),
      );
    }
    onSaved();
  });
  useEffect(() => {
    if (distribution === undefined) return;
    reset();
    setHostname(existing?.hostname ?? "");
    setOrigin(existing?.origin_url ?? "");
    setTtl(existing ? String(existing.default_ttl_s) : "");
    setActive(existing ? existing.status === "active" : true);
  }, [distribution, existing, reset]);

  return (
    <Dialog
      open={distribution !== undefined}
      title={existing ? `Edit ${existing.hostname}` : "Add distribution"}
      onClose={onClose}
    >
      <form noValidate onSubmit={submitting(submit)}>
        <Field
          label="Host name"
          name="hostname"
          error={errors.hostname}
          hint={existing ? "The host name cannot change." : "The name viewers use, e.g. cdn.example.com."}
        >
          {(control) => (
            <input
              {...control}
              required
              readOnly={Boolean(existing)}
              value={hostname}
              onChange={(event) => setHostname(event.target.value)}
            />
          )}
        </Field>
        <Field
          label="Origin URL"
          name="origin_url"
          error={errors.origin_url}
          hint={fixedOrigin ? "The library's own videos; it cannot change." : "Where the edge fetches from."}
        >
          {(control) => (
            <input
              {...control}
              type={fixedOrigin ? "text" : "url"}
              required
              readOnly={fixedOrigin}
              inputMode="url"
              value={origin}
              onChange={(event) => setOrigin(event.target.value)}
            />
          )}
        </Field>
        <Field
          label="Default TTL (seconds)"
          name="default_ttl_s"
          error={errors.default_ttl_s}
          hint={
            existing
              ? "How long an answer without caching headers is kept. Empty: the current value stays."
              : "How long an answer without caching headers is kept. Empty: the server's default."
          }
        >
          {(control) => (
            <input
              {...control}
              type="number"
              min={0}
              inputMode="numeric"
              value={ttl}
              onChange={(event) => setTtl(event.target.value)}
            />
          )}
        </Field>
        {existing && (
          <label className="field field-inline">
            <input
              type="checkbox"
              name="status"
              checked={active}
              onChange={(event) => setActive(event.target.checked)}
            />
            Active (disabled distributions answer 404 for every path)
          </label>
        )}
        <OtherErrors errors={errors} shown={["hostname", "origin_url", "default_ttl_s", "status"]} />
        <FormError message={formError} />
        <div className="dialog-actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={busy}>
            {existing ? "Save" : "Add distribution"}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
