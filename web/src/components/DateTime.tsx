/** A timestamp of the API (ISO 8601), shown in the reader's locale and time zone. */
export function DateTime({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">—</span>;
  return <time dateTime={value}>{new Date(value).toLocaleString()}</time>;
}
