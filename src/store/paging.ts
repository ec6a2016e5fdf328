import { type SelectQueryBuilder, sql } from "kysely";
import type { Page } from "../http/pagination.ts";
import type { Database } from "./tables.ts";

/**
 * Runs a filtered, ordered query for one page and counts the whole result with the same filters, in
 * one statement: the count is an uncorrelated subquery, which both stores evaluate once per statement
 * (from the index when the filters are indexed; a `count(*) over ()` window instead made SQLite build
 * every matching row in full before cutting the page). Only a page past the end counts apart.
 */
export async function selectPage<TB extends keyof Database, O>(
  query: SelectQueryBuilder<Database, TB, O>,
  page: Page,
): Promise<{ rows: O[]; total: number }> {
  const total = query.clearSelect().clearOrderBy().select(sql<number>`count(*)`.as("total"));
  const counted = await query.select(total.as("page_total")).limit(page.limit).offset(page.offset).execute();
  const first = counted[0];
  if (first) {
    const rows = counted.map(({ page_total, ...row }) => row as O);
    return { rows, total: Number(first.page_total) };
  }
  if (page.offset === 0) return { rows: [], total: 0 };
  const count = await total.executeTakeFirstOrThrow();
  return { rows: [], total: Number((count as { total: number }).total) };
}
