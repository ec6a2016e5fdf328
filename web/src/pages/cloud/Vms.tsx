import type { paths } from "@cumulo/client";
import { useState } from "react";
import { api, call, messageOf, removing } from "../../api.ts";
import { type Column, DataTable } from "../../components/DataTable.tsx";
import { ConfirmDialog, Dialog } from "../../components/Dialog.tsx";
import { Field, OtherErrors } from "../../components/Field.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { FormError, ListPanel } from "./ListPanel.tsx";

type Vm = paths["/v1/user-resource/vm/list"]["get"]["responses"][200]["content"]["application/json"][number];

/** The creation form's fields with the API's documented defaults (docs/cloud.md). */
const NEW_VM = {
  name: "",
  os_name: "ubuntu",
  os_version: "24.04",
  vcpu: "1",
  ram: "1024",
  disks: "20",
  username: "cumulo",
  password: "",
  description: "",
};
type VmForm = typeof NEW_VM;

const FIELDS: { name: keyof VmForm; label: string; type?: string; hint?: string }[] = [
  { name: "name", label: "Name", hint: "Required, up to 64 characters." },
  { name: "os_name", label: "Operating system" },
  { name: "os_version", label: "OS version" },
  { name: "vcpu", label: "vCPUs", type: "number", hint: "1-64" },
  { name: "ram", label: "Memory (MB)", type: "number", hint: "512-262144" },
  { name: "disks", label: "System disk (GB)", type: "number" },
  { name: "username", label: "User name" },
  { name: "password", label: "Password", type: "password", hint: "Optional; kept only as a hash." },
  { name: "description", label: "Description" },
];

/** A VM's memory (MB, as the API counts it) as people read it: "8 GB", "1.5 GB", "512 MB". */
const memoryInWords = (megabytes: number): string =>
  megabytes >= 1024 ? `${Number((megabytes / 1024).toFixed(1)).toLocaleString()} GB` : `${megabytes} MB`;

export function Vms() {
  const { readOnly } = useSignedIn();
  const vms = useLoad(() => call(api.GET("/v1/user-resource/vm/list")), "vms");
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<Vm>();
  const [actionError, setActionError] = useState<string>();
  const power = async (vm: Vm, action: "start" | "stop") => {
    setActionError(undefined);
    try {
      await call(api.POST(`/v1/user-resource/vm/${action}`, { body: { uuid: vm.uuid } }));
      vms.reload();
    } catch (error) {
      setActionError(
        `${action === "start" ? "Starting" : "Stopping"} ${vm.name} failed: ${messageOf(error)}`,
      );
    }
  };
  const columns: Column<Vm>[] = [
    { header: "Name", cell: (vm) => vm.name, rowHeader: true },
    {
      header: "Status",
      cell: (vm) => (
        <span className={vm.status === "running" ? "status status-ready" : "status"}>{vm.status}</span>
      ),
    },
    {
      header: "Size",
      cell: (vm) => `${vm.vcpu} vCPU${vm.vcpu === 1 ? "" : "s"} · ${memoryInWords(vm.memory)}`,
    },
    { header: "OS", cell: (vm) => `${vm.os_name} ${vm.os_version}` },
    {
      header: "Addresses",
      cell: (vm) => (
        <span className="mono">
          {vm.private_ipv4}
          {vm.public_ipv4 ? ` · ${vm.public_ipv4}` : ""}
        </span>
      ),
    },
    {
      header: "Actions",
      actions: true,
      cell: (vm) => (
        <div className="row-actions">
          {vm.status === "running" ? (
            <button
              type="button"
              disabled={readOnly}
              aria-label={`Stop ${vm.name}`}
              onClick={() => void power(vm, "stop")}
            >
              Stop
            </button>
          ) : (
            <button
              type="button"
              disabled={readOnly}
              aria-label={`Start ${vm.name}`}
              onClick={() => void power(vm, "start")}
            >
              Start
            </button>
          )}
          <button
            type="button"
            className="danger"
            disabled={readOnly}
            aria-label={`Delete ${vm.name}`}
            onClick={() => setDeleting(vm)}
          >
            Delete
          </button>
        </div>
      ),
    },
  ];

  return (
    <>
      <ListPanel
        title="Virtual machines"
        list={vms}
        empty="No virtual machine yet."
        actions={
          <button type="button" className="primary" disabled={readOnly} onClick={() => setCreating(true)}>
            Create VM
          </button>
        }
      >
        {(rows) => (
          <DataTable caption="Virtual machines" columns={columns} rows={rows} rowKey={(vm) => vm.uuid} />
        )}
      </ListPanel>
      <FormError message={actionError} />
      <CreateVmDialog
        open={creating}
        onClose={() => setCreating(false)}
        onCreated={() => {
          setCreating(false);
          vms.reload();
        }}
      />
      <ConfirmDialog
        open={deleting !== undefined}
        title="Delete virtual machine"
        confirmLabel="Delete VM"
        onClose={() => setDeleting(undefined)}
        onConfirm={async () => {
          if (!deleting) return;
          await removing(api.DELETE("/v1/user-resource/vm", { body: { uuid: deleting.uuid, force: true } }));
          vms.reload();
        }}
      >
        <p>
          Delete <strong>{deleting?.name}</strong> and its system disk? It is stopped first if it runs.
        </p>
      </ConfirmDialog>
    </>
  );
}

function CreateVmDialog({
  open,
  onClose,
  onCreated,
}: {
  open: boolean;
  onClose: () => void;
  onCreated: () => void;
}) {
  const [form, setForm] = useState<VmForm>(NEW_VM);
  const [publicIp, setPublicIp] = useState(false);
  const { submit, busy, errors, formError } = useSubmit(async () => {
    await call(
      api.POST("/v1/user-resource/vm", {
        body: {
          name: form.name,
          os_name: form.os_name,
          os_version: form.os_version,
          vcpu: Number(form.vcpu),
          ram: Number(form.ram),
          disks: Number(form.disks),
          username: form.username,
          description: form.description,
          reserve_public_ip: publicIp,
          ...(form.password ? { password: form.password } : {}),
        },
      }),
    );
    setForm(NEW_VM);
    setPublicIp(false);
    onCreated();
  });
  return (
    <Dialog open={open} title="Create a virtual machine" onClose={onClose}>
      <form noValidate onSubmit={submitting(submit)}>
        <div className="grid-2">
          {FIELDS.map((field) => (
            <Field
              key={field.name}
              label={field.label}
              name={field.name}
              error={errors[field.name]}
              hint={field.hint}
            >
              {(control) => (
                <input
                  {...control}
                  type={field.type ?? "text"}
                  autoComplete={field.type === "password" ? "new-password" : "off"}
                  value={form[field.name]}
                  onChange={(event) => setForm({ ...form, [field.name]: event.target.value })}
                />
              )}
            </Field>
          ))}
        </div>
        <label className="field field-inline">
          <input
            type="checkbox"
            name="reserve_public_ip"
            checked={publicIp}
            onChange={(event) => setPublicIp(event.target.checked)}
          />
          Reserve a public IP address
        </label>
        <OtherErrors errors={errors} shown={[...FIELDS.map((field) => field.name), "reserve_public_ip"]} />
        <FormError message={formError} />
        <div className="dialog-actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={busy}>
            Create VM
          </button>
        </div>
      </form>
    </Dialog>
  );
}
