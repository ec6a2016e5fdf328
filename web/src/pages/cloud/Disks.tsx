import type { paths } from "@cumulo/client";
import { useState } from "react";
import { api, call, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { DateTime } from "../../components/DateTime.tsx";
import { ConfirmDialog } from "../../components/Dialog.tsx";
import { Field, OptionalNameField, OtherErrors } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { FormError, ListPanel } from "./ListPanel.tsx";

type Disk = paths["/v1/storage/disks"]["get"]["responses"][200]["content"]["application/json"][number];

export function Disks() {
  const { readOnly } = useSignedIn();
  const disks = useLoad(() => call(api.GET("/v1/storage/disks")), "disks");
  const [name, setName] = useState("");
  const [size, setSize] = useState("10");
  const [deleting, setDeleting] = useState<Disk>();
  const { submit, busy, errors, formError } = useSubmit(async () => {
    await call(
      api.POST("/v1/storage/disks", {
        // An empty size is left out (Number("") would send 0, "must be at least 1"): the answer then
        // says the field is required, as its hint does.
        body: {
          ...((size.trim() === "" ? {} : { size_gb: Number(size) }) as { size_gb: number }),
          ...(name ? { display_name: name } : {}),
        },
      }),
    );
    setName("");
    disks.reload();
  });
  const columns: Column<Disk>[] = [
    {
      header: "Name",
      cell: (disk) => disk.display_name || <span className="mono">{disk.uuid}</span>,
      rowHeader: true,
    },
    { header: "Size", cell: (disk) => `${disk.size_gb} GB` },
    { header: "Status", cell: (disk) => <span className="status">{disk.status}</span> },
    { header: "Created", cell: (disk) => <DateTime value={disk.created_at} /> },
    {
      header: "Actions",
      actions: true,
      cell: (disk) => (
        <button
          type="button"
          className="danger"
          disabled={readOnly}
          aria-label={`Delete disk ${disk.display_name || disk.uuid}`}
          onClick={() => setDeleting(disk)}
        >
          Delete
        </button>
      ),
    },
  ];
  return (
    <>
      <section className="panel" aria-labelledby="cloud-disk-create">
        <h2 id="cloud-disk-create">Create a disk</h2>
        <form className="inline-form" noValidate onSubmit={submitting(submit)}>
          <WriteFields>
            <OptionalNameField
              name="display_name"
              error={errors.display_name}
              hint="Optional: without one, the disk is listed by its id."
              value={name}
              onChange={setName}
            />
            <Field label="Size (GB)" name="size_gb" error={errors.size_gb} hint="Required, 1 to 16384.">
              {(control) => (
                <input
                  {...control}
                  type="number"
                  required
                  min={1}
                  max={16384}
                  value={size}
                  onChange={(event) => setSize(event.target.value)}
                />
              )}
            </Field>
          </WriteFields>
          <button type="submit" className="primary" disabled={readOnly || busy}>
            Create disk
          </button>
        </form>
        <OtherErrors errors={errors} shown={["display_name", "size_gb"]} />
        <FormError message={formError} />
      </section>
      <ListPanel title="Disks" list={disks} empty="No disk yet.">
        {(rows) => <DataTable caption="Disks" columns={columns} rows={rows} rowKey={(disk) => disk.uuid} />}
      </ListPanel>
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete disk"
        confirmLabel="Delete disk"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/storage/disks/{disk_uuid}", { params: { path: { disk_uuid: deleting.uuid } } }),
          );
          disks.reload();
        }}
      >
        <p>
          Delete the disk{" "}
          {deleting?.display_name ? (
            <strong>{deleting.display_name}</strong>
          ) : (
            <span className="mono">{deleting?.uuid}</span>
          )}{" "}
          ({deleting?.size_gb} GB) and its data?
        </p>
      </ConfirmDialog>
    </>
  );
}
