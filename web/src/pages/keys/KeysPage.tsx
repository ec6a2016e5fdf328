import { useState } from "react";
import { api, call, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { ConfirmDialog, Dialog, SecretDialog } from "../../components/Dialog.tsx";
import { Field, OtherErrors } from "../../components/Field.tsx";
import { PageHeader } from "../../components/Layout.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";

interface ApiKey {
  id: number;
  name: string;
  prefix: string;
  read_only: boolean;
  created_at: string;
  last_used_at: string | null;
}

const when = (value: string | null) => (value ? new Date(value).toLocaleString() : "never");

/** The organization's API keys: no secrets listed; a new key's secret is shown once. */
export function KeysPage() {
  const { readOnly } = useSignedIn();
  const keys = useLoad(() => call(api.GET("/v1/organization/api-keys")), "keys");
  const [creating, setCreating] = useState(false);
  const [name, setName] = useState("");
  const [keyReadOnly, setKeyReadOnly] = useState(false);
  const [secret, setSecret] = useState<{ name: string; value: string }>();
  const [revoking, setRevoking] = useState<ApiKey>();
  const create = useSubmit(async () => {
    const created = await call(
      api.POST("/v1/organization/api-keys", { body: { name, read_only: keyReadOnly } }),
    );
    setCreating(false);
    setName("");
    setKeyReadOnly(false);
    setSecret({ name: created.data.name, value: created.data.api_key });
    keys.reload();
  });

  const columns: Column<ApiKey>[] = [
    { header: "Name", rowHeader: true, cell: (key) => key.name },
    { header: "Prefix", cell: (key) => <code>{key.prefix}…</code> },
    { header: "Access", cell: (key) => (key.read_only ? "read-only" : "read and write") },
    { header: "Created", cell: (key) => when(key.created_at) },
    { header: "Last used", cell: (key) => when(key.last_used_at) },
    {
      header: "Actions",
      actions: true,
      cell: (key) => (
        <button
          type="button"
          className="danger"
          disabled={readOnly}
          aria-label={`Revoke ${key.name}`}
          onClick={() => setRevoking(key)}
        >
          Revoke
        </button>
      ),
    },
  ];

  return (
    <>
      <PageHeader title="API keys">
        <button
          type="button"
          className="primary"
          disabled={readOnly}
          onClick={() => {
            create.reset();
            setCreating(true);
          }}
        >
          New API key
        </button>
      </PageHeader>
      <p>Keys act for the whole organization on every API. A read-only key can read but change nothing.</p>
      {keys.state === "loading" && <Loading what="Loading API keys" />}
      {keys.state === "error" && <ErrorState error={keys.error} onRetry={keys.reload} />}
      {keys.state === "ready" &&
        (keys.data.data.length === 0 ? (
          <Empty>No API keys yet.</Empty>
        ) : (
          <DataTable caption="API keys" columns={columns} rows={keys.data.data} rowKey={(key) => key.id} />
        ))}
      <Dialog open={creating} title="New API key" onClose={() => setCreating(false)}>
        <form noValidate onSubmit={submitting(create.submit)}>
          <Field
            label="Name"
            name="name"
            hint="What the key is for, e.g. ci or backend"
            error={create.errors.name}
          >
            {(control) => (
              <input {...control} value={name} onChange={(event) => setName(event.target.value)} />
            )}
          </Field>
          <label className="field field-inline">
            <input
              type="checkbox"
              name="read_only"
              checked={keyReadOnly}
              onChange={(event) => setKeyReadOnly(event.target.checked)}
            />{" "}
            Read-only
          </label>
          <OtherErrors errors={create.errors} shown={["name"]} />
          {create.formError && (
            <p className="field-error" role="alert">
              {create.formError}
            </p>
          )}
          <div className="dialog-actions">
            <button type="button" onClick={() => setCreating(false)}>
              Cancel
            </button>
            <button type="submit" className="primary" disabled={create.busy}>
              Create key
            </button>
          </div>
        </form>
      </Dialog>
      <SecretDialog
        open={secret !== undefined}
        title={`API key ${secret?.name ?? ""} created`}
        label="API key"
        secret={secret?.value ?? ""}
        onClose={() => setSecret(undefined)}
      />
      <ConfirmDialog
        open={revoking !== undefined}
        title="Revoke API key"
        confirmLabel="Revoke key"
        onClose={() => setRevoking(undefined)}
        onConfirm={async () => {
          if (!revoking) return;
          await removing(
            api.DELETE("/v1/organization/api-keys/{keyId}", { params: { path: { keyId: revoking.id } } }),
          );
          keys.reload();
        }}
      >
        <p>
          Revoke <strong>{revoking?.name}</strong> (<code>{revoking?.prefix}…</code>)? Requests with it are
          refused at once.
        </p>
      </ConfirmDialog>
    </>
  );
}
