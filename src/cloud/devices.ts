/**
 * Device names of a VM's disks: the control plane chooses them (driver/types.ts), drivers use the
 * ones they are given. `vda` is the system disk; data disks take `vdb` ... `vdz`.
 */
export const SYSTEM_DEVICE = "vda";
export const DEVICE_NAMES = Array.from({ length: 26 }, (_, i) => `vd${String.fromCharCode(97 + i)}`);

/** The first data-disk device name not in `used`, or undefined when the VM holds all of them. */
export function freeDataDevice(used: Iterable<string | null>): string | undefined {
  const taken = new Set(used);
  return DEVICE_NAMES.find((name) => name !== SYSTEM_DEVICE && !taken.has(name));
}
