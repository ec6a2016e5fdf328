import { type SelectQueryBuilder, sql } from "kysely";
import type { Page } from "../http/pagination.ts";
import type { Database } from "./tables.ts";

/**
 * Runs a filtered, ordered query for one page and counts the whole result with the same filters, in
 * one statement (a window count) so a page costs one query; only a page past the end counts apart.
 */
export async function selectPage<TB extends keyof Database, O>(
  query: SelectQueryBuilder<Database, TB, O>,
  page: Page,
): Promise<{ rows: O[]; total: number }> {
  const counted = await query
    .select(sql<number>`count(*) over ()`.as("page_total"))
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const first = counted[0];
  if (first) {
    const rows = counted.map(({ page_total, ...row }) => row as O);
    return { rows, total: Number(first.page_total) };
  }
  if (page.offset === 0) return { rows: [], total: 0 };
  const count = await query
    .clearSelect()
    .clearOrderBy()
    .select(sql<number>`count(*)`.as("total"))
    .executeTakeFirstOrThrow();
  return { rows: [], total: Number((count as { total: number }).total) };
}
