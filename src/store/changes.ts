import { type RawBuilder, sql } from "kysely";

/** The columns that record a change rather than being one. */
const BOOKKEEPING = new Set(["updated_at", "updated_by"]);

/**
 * An update's `set` in which `updated_at` (and `updated_by`) take their new values only when one of
 * the other columns changes: a change request that changes nothing leaves the record as it was. Each
 * store compares in the column's own type (`is distinct from`: JSON as JSON on PostgreSQL, booleans
 * as stored), which a comparison in JavaScript of rows read back from two stores would have to redo.
 * The cloud's services compare the views they read instead (`changesRow` in `src/cloud/repository.ts`).
 * `asText` names columns compared as their text: PostgreSQL's `json` type (kept as sent, for its
 * order) has no equality.
 */
export function touchedOnlyWhenChanged<Changes extends object>(
  changes: Changes,
  asText: readonly (keyof Changes & string)[] = [],
): Changes {
  const given = Object.entries(changes).filter(([, value]) => value !== undefined);
  const fields = given.filter(([column]) => !BOOKKEEPING.has(column));
  const changed: RawBuilder<boolean> =
    fields.length === 0
      ? sql<boolean>`false`
      : sql<boolean>`(${sql.join(
          fields.map(([column, value]) =>
            (asText as readonly string[]).includes(column)
              ? sql`cast(${sql.ref(column)} as text) is distinct from cast(${value} as text)`
              : sql`${sql.ref(column)} is distinct from ${value}`,
          ),
          sql` or `,
        )})`;
  const set: Record<string, unknown> = Object.fromEntries(fields);
  for (const [column, value] of given) {
    if (BOOKKEEPING.has(column))
      set[column] = sql`case when ${changed} then ${value} else ${sql.ref(column)} end`;
  }
  return set as Changes;
}
