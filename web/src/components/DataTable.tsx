import type { ReactNode } from "react";

export interface Column<Row> {
  header: string;
  cell: (row: Row) => ReactNode;
  /** Cells of this column are the row's heading for screen readers. */
  rowHeader?: boolean;
}

export interface Paging {
  page: number;
  totalPages: number;
  total: number;
  onPage: (page: number) => void;
}

interface DataTableProps<Row> {
  caption: string;
  columns: Column<Row>[];
  rows: Row[];
  rowKey: (row: Row) => string | number;
  paging?: Paging;
}

/** A table that scrolls sideways on narrow screens, with paging links below it. */
export function DataTable<Row>({ caption, columns, rows, rowKey, paging }: DataTableProps<Row>) {
  return (
    <div className="table-wrap">
      <table>
        <caption className="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.header} scope="col">
                {column.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((column) =>
                column.rowHeader ? (
                  <th key={column.header} scope="row">
                    {column.cell(row)}
                  </th>
                ) : (
                  <td key={column.header}>{column.cell(row)}</td>
                ),
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {paging && paging.totalPages > 1 && (
        <nav className="pager" aria-label={`${caption} pages`}>
          <button type="button" disabled={paging.page <= 1} onClick={() => paging.onPage(paging.page - 1)}>
            Previous
          </button>
          <span aria-live="polite">
            Page {paging.page} of {paging.totalPages} ({paging.total} in all)
          </span>
          <button
            type="button"
            disabled={paging.page >= paging.totalPages}
            onClick={() => paging.onPage(paging.page + 1)}
          >
            Next
          </button>
        </nav>
      )}
    </div>
  );
}

/** `meta.pagination` of the API's list answers as the table's paging. */
export function pagingOf(
  meta: { pagination: { page: number; total: number; total_pages: number } },
  onPage: (page: number) => void,
): Paging {
  const { page, total, total_pages: totalPages } = meta.pagination;
  return { page, total, totalPages, onPage };
}
