import { createHash } from "node:crypto";
import { DEVICE_NAMES, SYSTEM_DEVICE } from "../devices.ts";
import {
  DriverRejection,
  type InfrastructureDriver,
  type LoadBalancerSpec,
  type PowerState,
  type VmSpec,
} from "./types.ts";

/**
 * Infrastructure simulated on this node: no hypervisor, but the same inputs are checked the way a
 * real backend checks them, and the facts a backend reports are derived deterministically (the MAC
 * address from the VM's identity), so every node of a cluster answers alike without shared memory.
 * All state lives in the store; this driver keeps none.
 */
export class SimulatedDriver implements InfrastructureDriver {
  readonly name = "simulated";

  async createVm(spec: VmSpec): Promise<{ mac: string; status: PowerState }> {
    if (spec.systemDisk.device !== SYSTEM_DEVICE) throw new DriverRejection("the system disk must be vda");
    if (spec.vcpu < 1 || spec.memoryMb < 512) throw new DriverRejection("VM below the minimum size");
    return { mac: this.macFor(spec.location, spec.uuid), status: "running" };
  }

  async resizeVm(_location: string, _uuid: string, change: { vcpu: number; memoryMb: number }) {
    if (change.vcpu < 1 || change.memoryMb < 512) throw new DriverRejection("VM below the minimum size");
  }

  async setPower(_location: string, _uuid: string, state: PowerState): Promise<PowerState> {
    return state;
  }

  async deleteVm(): Promise<void> {}

  async createDisk(_location: string, _uuid: string, sizeGb: number): Promise<void> {
    if (!Number.isInteger(sizeGb) || sizeGb < 1) throw new DriverRejection("invalid disk size");
  }

  async resizeDisk(location: string, uuid: string, sizeGb: number): Promise<void> {
    await this.createDisk(location, uuid, sizeGb);
  }

  async deleteDisk(): Promise<void> {}

  async attachDisk(_location: string, _vmUuid: string, _diskUuid: string, device: string): Promise<void> {
    if (device === SYSTEM_DEVICE || !DEVICE_NAMES.includes(device)) {
      throw new DriverRejection(`device ${device} cannot hold a data disk`);
    }
  }

  async detachDisk(): Promise<void> {}

  async routeFloatingIp(): Promise<void> {}

  async applyLoadBalancer(spec: LoadBalancerSpec): Promise<void> {
    const ports = new Set(spec.rules.map((rule) => rule.sourcePort));
    if (ports.size !== spec.rules.length) throw new DriverRejection("two rules listen on one port");
  }

  async deleteLoadBalancer(): Promise<void> {}

  /** A locally administered unicast MAC (52:54:00 like QEMU), stable for the VM. */
  private macFor(location: string, uuid: string): string {
    const digest = createHash("sha256").update(`${location}/${uuid}`).digest();
    const tail = [...digest.subarray(0, 3)].map((byte) => byte.toString(16).padStart(2, "0"));
    return ["52", "54", "00", ...tail].join(":");
  }
}
