import type { PageMeta, PageQuery } from "./schemas.ts";

export interface Page {
  limit: number;
  offset: number;
}

export const toPage = (query: PageQuery): Page => ({
  limit: query.limit,
  offset: (query.page - 1) * query.limit,
});

/**
 * `meta` of a list: links are relative paths carrying `limit` and `page` first, then the request's
 * other filters in the order given.
 */
export function pageMeta(
  path: string,
  query: PageQuery,
  total: number,
  filters: Record<string, string | number | boolean | undefined> = {},
): PageMeta {
  const totalPages = Math.ceil(total / query.limit);
  const link = (page: number) => {
    const params = new URLSearchParams({ limit: String(query.limit), page: String(page) });
    for (const [name, value] of Object.entries(filters)) {
      if (value !== undefined) params.append(name, String(value));
    }
    return `${path}?${params.toString()}`;
  };
  return {
    pagination: { page: query.page, page_size: query.limit, total, total_pages: totalPages },
    links: { self: link(query.page), first: link(1), last: link(Math.max(totalPages, 1)) },
  };
}
