import { type SelectQueryBuilder, sql } from "kysely";
import type { Page } from "../http/pagination.ts";
import type { Database } from "./tables.ts";

/** Runs a filtered, ordered query for one page, and counts the whole result with the same filters. */
export async function selectPage<TB extends keyof Database, O>(
  query: SelectQueryBuilder<Database, TB, O>,
  page: Page,
): Promise<{ rows: O[]; total: number }> {
  const [rows, count] = await Promise.all([
    query.limit(page.limit).offset(page.offset).execute(),
    query.clearSelect().clearOrderBy().select(sql<number>`count(*)`.as("total")).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number((count as { total: number }).total) };
}
