import type { paths } from "@cumulo/client";
import { useState } from "react";
import { api, call, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { DateTime } from "../../components/DateTime.tsx";
import { ConfirmDialog, SecretDialog } from "../../components/Dialog.tsx";
import { Field, OtherErrors } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { FormError, ListPanel } from "./ListPanel.tsx";

type Token =
  paths["/v1/user-resource/token/list"]["get"]["responses"][200]["content"]["application/json"][number];

/** Cloud tokens: the list (never a secret), a creation form whose token is shown once, deletion. */
export function Tokens() {
  const { readOnly } = useSignedIn();
  const tokens = useLoad(() => call(api.GET("/v1/user-resource/token/list")), "tokens");
  const [description, setDescription] = useState("");
  const [restricted, setRestricted] = useState(false);
  const [secret, setSecret] = useState<string>();
  const [deleting, setDeleting] = useState<Token>();
  const { submit, busy, errors, formError } = useSubmit(async () => {
    const created = await call(api.POST("/v1/user-resource/token", { body: { description, restricted } }));
    const token = created.find((row) => row.token)?.token;
    if (token) setSecret(token);
    setDescription("");
    setRestricted(false);
    tokens.reload();
  });
  const columns: Column<Token>[] = [
    {
      header: "Description",
      cell: (row) => row.description || <span className="muted">(none)</span>,
      rowHeader: true,
    },
    { header: "Id", cell: (row) => row.id },
    { header: "Restricted", cell: (row) => (row.restricted ? "yes" : "no") },
    { header: "Created", cell: (row) => <DateTime value={row.created_at} /> },
    {
      header: "Actions",
      actions: true,
      cell: (row) => (
        <button
          type="button"
          className="danger"
          disabled={readOnly}
          aria-label={`Delete token ${row.description || row.id}`}
          onClick={() => setDeleting(row)}
        >
          Delete
        </button>
      ),
    },
  ];

  return (
    <>
      <section className="panel" aria-labelledby="cloud-token-create">
        <h2 id="cloud-token-create">Create a token</h2>
        <form className="inline-form" noValidate onSubmit={submitting(submit)}>
          <WriteFields>
            <Field label="Description" name="description" error={errors.description}>
              {(control) => (
                <input
                  {...control}
                  value={description}
                  onChange={(event) => setDescription(event.target.value)}
                />
              )}
            </Field>
            <label className="field field-inline">
              <input
                type="checkbox"
                name="restricted"
                checked={restricted}
                onChange={(event) => setRestricted(event.target.checked)}
              />
              Restricted (cannot manage tokens)
            </label>
          </WriteFields>
          <button type="submit" className="primary" disabled={readOnly || busy}>
            Create token
          </button>
        </form>
        <OtherErrors errors={errors} shown={["description", "restricted"]} />
        <FormError message={formError} />
      </section>
      <ListPanel title="Tokens" list={tokens} empty="No cloud token yet.">
        {(rows) => (
          <DataTable caption="Cloud tokens" columns={columns} rows={rows} rowKey={(row) => row.id} />
        )}
      </ListPanel>
      <SecretDialog
        open={secret !== undefined}
        title="Token created"
        label="Token"
        secret={secret ?? ""}
        onClose={() => setSecret(undefined)}
      />
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete token"
        confirmLabel="Delete token"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(api.DELETE("/v1/user-resource/token", { body: { token_id: deleting.id } }));
          tokens.reload();
        }}
      >
        <p>Delete this token? Programs using it are refused from their next request.</p>
      </ConfirmDialog>
    </>
  );
}
