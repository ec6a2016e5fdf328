/** Row values that differ by store, read back as one JS shape. */
export const readBool = (value: boolean | number | null): boolean => value === true || value === 1;

export function readJson<T>(value: string | null): T | null {
  return value === null ? null : (JSON.parse(value) as T);
}

export const writeJson = (value: unknown): string | null =>
  value === null || value === undefined ? null : JSON.stringify(value);
