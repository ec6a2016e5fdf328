import type { paths } from "@cumulo/client";
import { useState } from "react";
import { api, call, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { ConfirmDialog } from "../../components/Dialog.tsx";
import { Field, OptionalNameField, OtherErrors } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { FormError, ListPanel } from "./ListPanel.tsx";

type LoadBalancer =
  paths["/v1/network/load_balancers"]["get"]["responses"][200]["content"]["application/json"][number];

/** Load balancers with their forwarding rules; the form creates one with a first rule. */
export function LoadBalancers() {
  const { readOnly } = useSignedIn();
  const balancers = useLoad(() => call(api.GET("/v1/network/load_balancers")), "load-balancers");
  const [name, setName] = useState("");
  const [sourcePort, setSourcePort] = useState("80");
  const [targetPort, setTargetPort] = useState("8080");
  const [deleting, setDeleting] = useState<LoadBalancer>();
  const { submit, busy, errors, formError } = useSubmit(async () => {
    await call(
      api.POST("/v1/network/load_balancers", {
        body: {
          ...(name ? { display_name: name } : {}),
          forwarding_rules: [
            { protocol: "TCP", source_port: Number(sourcePort), target_port: Number(targetPort) },
          ],
        },
      }),
    );
    setName("");
    balancers.reload();
  });
  // The API names a rule's field `forwarding_rules.0.source_port`; the form has one rule.
  const ruleError = (field: string) =>
    errors[`forwarding_rules.0.${field}`] ?? errors[`forwarding_rules[0].${field}`];
  const columns: Column<LoadBalancer>[] = [
    {
      header: "Name",
      cell: (lb) => lb.display_name || <span className="mono">{lb.uuid}</span>,
      rowHeader: true,
    },
    { header: "Private address", cell: (lb) => <span className="mono">{lb.private_address}</span> },
    {
      header: "Forwarding rules",
      cell: (lb) =>
        lb.forwarding_rules
          .map((rule) => `${rule.protocol} ${rule.source_port} → ${rule.target_port}`)
          .join(", ") || <span className="muted">none</span>,
    },
    { header: "Targets", cell: (lb) => lb.targets.length },
    {
      header: "Actions",
      actions: true,
      cell: (lb) => (
        <button
          type="button"
          className="danger"
          disabled={readOnly}
          aria-label={`Delete ${lb.display_name || lb.uuid}`}
          onClick={() => setDeleting(lb)}
        >
          Delete
        </button>
      ),
    },
  ];
  return (
    <>
      <section className="panel" aria-labelledby="cloud-lb-create">
        <h2 id="cloud-lb-create">Create a load balancer</h2>
        <form className="inline-form" noValidate onSubmit={submitting(submit)}>
          <WriteFields>
            <OptionalNameField
              name="display_name"
              error={errors.display_name}
              hint="Optional: without one, it is listed by its id."
              value={name}
              onChange={setName}
            />
            <Field label="Source port" name="forwarding_rules.0.source_port" error={ruleError("source_port")}>
              {(control) => (
                <input
                  {...control}
                  type="number"
                  min={1}
                  max={65535}
                  value={sourcePort}
                  onChange={(event) => setSourcePort(event.target.value)}
                />
              )}
            </Field>
            <Field label="Target port" name="forwarding_rules.0.target_port" error={ruleError("target_port")}>
              {(control) => (
                <input
                  {...control}
                  type="number"
                  min={1}
                  max={65535}
                  value={targetPort}
                  onChange={(event) => setTargetPort(event.target.value)}
                />
              )}
            </Field>
          </WriteFields>
          <button type="submit" className="primary" disabled={readOnly || busy}>
            Create load balancer
          </button>
        </form>
        <OtherErrors
          errors={errors}
          shown={[
            "display_name",
            "forwarding_rules.0.source_port",
            "forwarding_rules.0.target_port",
            "forwarding_rules[0].source_port",
            "forwarding_rules[0].target_port",
          ]}
        />
        <FormError message={formError} />
      </section>
      <ListPanel title="Load balancers" list={balancers} empty="No load balancer yet.">
        {(rows) => (
          <DataTable caption="Load balancers" columns={columns} rows={rows} rowKey={(lb) => lb.uuid} />
        )}
      </ListPanel>
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete load balancer"
        confirmLabel="Delete load balancer"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(
            api.DELETE("/v1/network/load_balancers/{load_balancer_uuid}", {
              params: { path: { load_balancer_uuid: deleting.uuid } },
            }),
          );
          balancers.reload();
        }}
      >
        <p>
          Delete{" "}
          {deleting?.display_name ? (
            <strong>{deleting.display_name}</strong>
          ) : (
            <span className="mono">{deleting?.uuid}</span>
          )}
          ? Its rules and targets go with it.
        </p>
      </ConfirmDialog>
    </>
  );
}
