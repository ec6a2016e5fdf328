import type { paths } from "@cumulo/client";
import { useState } from "react";
import { api, call, messageOf, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { ConfirmDialog, CopyButton, SecretDialog } from "../../components/Dialog.tsx";
import { ErrorState, Loading } from "../../components/States.tsx";
import { WrapPoints } from "../../components/WrapPoints.tsx";
import { useOneAtATime } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { FormError, ListPanel } from "./ListPanel.tsx";

type S3Key = paths["/v1/storage/user/keys"]["get"]["responses"][200]["content"]["application/json"][number];

/**
 * The organization's object-storage user, its endpoint and key pairs. The API lists secret keys to
 * write-capable callers (SPEC.md; docs/cloud.md), so each row can copy its secret; a new pair's
 * secret is also shown in a dialog, which says it stays in the list rather than "shown only once".
 */
export function ObjectStorage() {
  const { readOnly } = useSignedIn();
  // Opening the page as a write-capable user creates the user on first use (docs/cloud.md).
  const user = useLoad(
    async () => ({
      user: await call(api.GET("/v1/storage/user")),
      endpoint: await call(api.GET("/v1/storage/api/s3")),
    }),
    "s3-user",
  );
  const keys = useLoad(() => call(api.GET("/v1/storage/user/keys")), "s3-keys");
  const [created, setCreated] = useState<S3Key>();
  const [deleting, setDeleting] = useState<S3Key>();
  const [actionError, setActionError] = useState<string>();
  const createKey = async () => {
    setActionError(undefined);
    try {
      const before = new Set((keys.data ?? []).map((key) => key.accessKey));
      const after = await call(api.POST("/v1/storage/user/keys"));
      setCreated(after.find((key) => !before.has(key.accessKey)) ?? after.at(-1));
      keys.reload();
    } catch (error) {
      setActionError(`Creating a key failed: ${messageOf(error)}`);
    }
  };
  const creating = useOneAtATime(createKey);
  const columns: Column<S3Key>[] = [
    {
      header: "Access key",
      cell: (key) => <span className="mono nowrap">{key.accessKey}</span>,
      rowHeader: true,
    },
    {
      header: "Secret key",
      cell: (key) =>
        key.secretKey ? (
          <CopyButton text={key.secretKey} label="Copy secret" />
        ) : (
          <span className="muted">hidden from read-only users</span>
        ),
    },
    {
      header: "Actions",
      actions: true,
      cell: (key) => (
        <button
          type="button"
          className="danger"
          disabled={readOnly}
          aria-label={`Delete key ${key.accessKey}`}
          onClick={() => setDeleting(key)}
        >
          Delete
        </button>
      ),
    },
  ];
  return (
    <>
      <section className="panel" aria-labelledby="cloud-s3-user">
        <h2 id="cloud-s3-user">Object-storage user</h2>
        {user.state === "loading" && <Loading what="Loading the object-storage user" />}
        {user.state === "error" && <ErrorState error={user.error} onRetry={user.reload} />}
        {user.state === "ready" && (
          <dl className="facts">
            <dt>User id</dt>
            <dd className="mono">{user.data.user.userId}</dd>
            <dt>Display name</dt>
            <dd>{user.data.user.displayName}</dd>
            <dt>Bucket limit</dt>
            <dd>{user.data.user.maxBuckets}</dd>
            <dt>Suspended</dt>
            <dd>{user.data.user.suspended ? "yes" : "no"}</dd>
            <dt>S3 endpoint</dt>
            <dd className="mono break">
              <WrapPoints text={user.data.endpoint.url} />
            </dd>
          </dl>
        )}
      </section>
      <FormError message={actionError} />
      <ListPanel
        title="Access keys"
        list={keys}
        empty="No key pair. Create one to use object storage."
        actions={
          <button
            type="button"
            className="primary"
            disabled={readOnly}
            aria-busy={creating.busy}
            onClick={() => void creating.run()}
          >
            Create key pair
          </button>
        }
      >
        {(rows) => (
          <DataTable caption="Access keys" columns={columns} rows={rows} rowKey={(key) => key.accessKey} />
        )}
      </ListPanel>
      <SecretDialog
        open={created !== undefined}
        title={`Key pair ${created?.accessKey ?? ""}`}
        label="Secret key"
        secret={created?.secretKey ?? ""}
        note="The secret key stays listed with its key pair: copy it there again whenever you need it."
        onClose={() => setCreated(undefined)}
      />
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete key pair"
        confirmLabel="Delete key pair"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(api.DELETE("/v1/storage/user/keys", { body: { access_key: deleting.accessKey } }));
          keys.reload();
        }}
      >
        <p>
          Delete <span className="mono">{deleting?.accessKey}</span>? Programs using it are refused at once.
        </p>
      </ConfirmDialog>
    </>
  );
}
