/**
 * The infrastructure driver: the boundary between Cumulo's cloud control plane (the store, the
 * rules, the API) and whatever runs the machines, volumes and network. The control plane decides
 * *what* must exist (it owns identifiers, addresses and device names, enforced by the store); a
 * driver makes it so on real infrastructure and reports the facts only the infrastructure knows
 * (a NIC's MAC address, the power state).
 *
 * Rules every driver follows:
 * - Calls happen inside the store transaction of the operation, after its rows are written (a
 *   creation is asked for once, with identifiers chosen once): if a call throws, the operation
 *   answers 500 and nothing is recorded. A driver must therefore make each call idempotent (the same
 *   call repeated after a rolled-back attempt must succeed) and should undo its own partial work
 *   before throwing. A transaction PostgreSQL rolls back to break a deadlock runs again
 *   (`transactor`), identifiers chosen anew: a call that succeeded in the rolled-back attempt then
 *   made something the store does not record, which a real driver must find and remove.
 * - Never allocate addresses or device names on its own: use the ones it is given.
 * - Return promptly; long provisioning belongs behind a status the driver reports later.
 * - Refuse a request the infrastructure cannot honour (a resize it cannot do while the VM runs,
 *   say) by throwing `DriverRejection`: the operation is rolled back and answers 409 with its
 *   message. Any other error is a failure (500).
 */

/** An expected refusal by the infrastructure; the API answers 409 with its message. */
export class DriverRejection extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DriverRejection";
  }
}

export interface VmSpec {
  location: string;
  uuid: string;
  name: string;
  hostname: string;
  vcpu: number;
  memoryMb: number;
  osName: string;
  osVersion: string;
  username: string;
  /** Plain password, handed to the guest's first-boot configuration only; never stored. */
  password: string | undefined;
  publicKeys: string[];
  privateIpv4: string;
  systemDisk: { uuid: string; sizeGb: number; device: "vda" };
}

export type PowerState = "running" | "stopped";

export interface LoadBalancerSpec {
  location: string;
  uuid: string;
  privateAddress: string;
  rules: { uuid: string; protocol: string; sourcePort: number; targetPort: number }[];
  targets: { uuid: string; ipAddress: string }[];
}

export interface InfrastructureDriver {
  readonly name: string;
  /** Creates and boots a VM with its system disk; returns what the hypervisor assigned. */
  createVm(spec: VmSpec): Promise<{ mac: string; status: PowerState }>;
  resizeVm(location: string, uuid: string, change: { vcpu: number; memoryMb: number }): Promise<void>;
  setPower(location: string, uuid: string, state: PowerState): Promise<PowerState>;
  /** Destroys the VM and its system disk; attached data disks are detached first by the caller. */
  deleteVm(location: string, uuid: string): Promise<void>;
  createDisk(location: string, uuid: string, sizeGb: number): Promise<void>;
  /** Grows a volume (attached or not) to `sizeGb`; the API never asks for a smaller one. */
  resizeDisk(location: string, uuid: string, sizeGb: number): Promise<void>;
  deleteDisk(location: string, uuid: string): Promise<void>;
  attachDisk(location: string, vmUuid: string, diskUuid: string, device: string): Promise<void>;
  detachDisk(location: string, vmUuid: string, diskUuid: string, device: string): Promise<void>;
  /** Routes a public address to a private one (`null` withdraws it). */
  routeFloatingIp(location: string, address: string, privateIp: string | null): Promise<void>;
  /** Creates or replaces a load balancer's whole configuration. */
  applyLoadBalancer(spec: LoadBalancerSpec): Promise<void>;
  deleteLoadBalancer(location: string, uuid: string): Promise<void>;
}
