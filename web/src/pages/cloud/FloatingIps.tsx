import type { paths } from "@cumulo/client";
import { useState } from "react";
import { api, call, messageOf, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { ConfirmDialog } from "../../components/Dialog.tsx";
import { OptionalNameField, OtherErrors } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { FormError, ListPanel } from "./ListPanel.tsx";

type FloatingIp =
  paths["/v1/network/ip_addresses"]["get"]["responses"][200]["content"]["application/json"][number];

export function FloatingIps() {
  const { readOnly } = useSignedIn();
  const addresses = useLoad(
    () => call(api.GET("/v1/network/ip_addresses", { params: { query: {} } })),
    "ips",
  );
  const [name, setName] = useState("");
  const [releasing, setReleasing] = useState<FloatingIp>();
  const [actionError, setActionError] = useState<string>();
  const { submit, busy, errors, formError } = useSubmit(async () => {
    await call(api.POST("/v1/network/ip_addresses", { body: name ? { name } : {} }));
    setName("");
    addresses.reload();
  });
  const unassign = async (ip: FloatingIp) => {
    setActionError(undefined);
    try {
      await call(
        api.POST("/v1/network/ip_addresses/{public_ipv4_address}/unassign", {
          params: { path: { public_ipv4_address: ip.address } },
        }),
      );
      addresses.reload();
    } catch (error) {
      setActionError(`Unassigning ${ip.address} failed: ${messageOf(error)}`);
    }
  };
  const columns: Column<FloatingIp>[] = [
    { header: "Address", cell: (ip) => <span className="mono">{ip.address}</span>, rowHeader: true },
    { header: "Name", cell: (ip) => ip.name },
    {
      header: "Assigned to",
      cell: (ip) =>
        ip.assigned_to ? (
          <span>
            {ip.assigned_to_resource_type} <span className="mono">{ip.assigned_to}</span>
          </span>
        ) : (
          <span className="muted">Not assigned</span>
        ),
    },
    {
      header: "Actions",
      actions: true,
      cell: (ip) => (
        <div className="row-actions">
          {ip.assigned_to && (
            <button
              type="button"
              disabled={readOnly}
              aria-label={`Unassign ${ip.address}`}
              onClick={() => void unassign(ip)}
            >
              Unassign
            </button>
          )}
          <button
            type="button"
            className="danger"
            disabled={readOnly}
            aria-label={`Release ${ip.address}`}
            onClick={() => setReleasing(ip)}
          >
            Release
          </button>
        </div>
      ),
    },
  ];
  return (
    <>
      <section className="panel" aria-labelledby="cloud-ip-create">
        <h2 id="cloud-ip-create">Allocate an address</h2>
        <form className="inline-form" noValidate onSubmit={submitting(submit)}>
          <WriteFields>
            <OptionalNameField
              name="name"
              error={errors.name}
              hint="Optional: the address is its label."
              value={name}
              onChange={setName}
            />
          </WriteFields>
          <button type="submit" className="primary" disabled={readOnly || busy}>
            Allocate
          </button>
        </form>
        <OtherErrors errors={errors} shown={["name"]} />
        <FormError message={formError} />
      </section>
      <FormError message={actionError} />
      <ListPanel title="Floating IPs" list={addresses} empty="No floating IP yet.">
        {(rows) => (
          <DataTable caption="Floating IPs" columns={columns} rows={rows} rowKey={(ip) => ip.address} />
        )}
      </ListPanel>
      <ConfirmDialog
        open={releasing !== undefined}
        title="Release address"
        confirmLabel="Release"
        onClose={() => setReleasing(undefined)}
        onConfirm={async () => {
          if (!releasing) return;
          await removing(
            api.DELETE("/v1/network/ip_addresses/{public_ipv4_address}", {
              params: { path: { public_ipv4_address: releasing.address } },
            }),
          );
          addresses.reload();
        }}
      >
        <p>
          Release <span className="mono">{releasing?.address}</span>? Another organization may be given it
          next.
        </p>
      </ConfirmDialog>
    </>
  );
}
