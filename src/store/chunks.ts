/**
 * Ids bound in one statement: a folder tree can hold any number of videos, and a statement may bind
 * at most 32,766 values on SQLite and 65,535 on PostgreSQL (past it, PostgreSQL's count wraps).
 */
export const IDS_PER_STATEMENT = 1000;

/** `items` in runs of at most `size`, in order. */
export function chunksOf<T>(items: readonly T[], size = IDS_PER_STATEMENT): T[][] {
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += size) chunks.push(items.slice(start, start + size));
  return chunks;
}
