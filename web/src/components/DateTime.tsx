/**
 * Cloud token times are `YYYY-MM-DD HH:MM:SS` in UTC without saying so (docs/cloud.md); a browser
 * reads such a string as its own local time, so a reader east or west of UTC saw it hours off.
 */
const WITHOUT_ZONE = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?$/;

/** The instant an API timestamp names: ISO 8601 as it is, a time without a zone as UTC. */
const instantOf = (value: string): Date =>
  new Date(WITHOUT_ZONE.test(value) ? `${value.replace(" ", "T")}Z` : value);

/** A timestamp of the API, shown in the reader's locale and time zone. */
export function DateTime({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">—</span>;
  const instant = instantOf(value);
  if (Number.isNaN(instant.getTime())) return <span>{value}</span>;
  return <time dateTime={instant.toISOString()}>{instant.toLocaleString()}</time>;
}
