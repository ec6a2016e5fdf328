import { type ReactNode, useEffect, useRef, useState } from "react";

export interface Column<Row> {
  header: string;
  cell: (row: Row) => ReactNode;
  /** Cells of this column are the row's heading for screen readers. */
  rowHeader?: boolean;
  /** The row's buttons: kept in view at the right edge when the table scrolls sideways. */
  actions?: boolean;
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

/** Whether the element's content is wider than the element (it scrolls sideways), kept up to date. */
function useOverflowing<E extends HTMLElement>() {
  const ref = useRef<E>(null);
  const [overflowing, setOverflowing] = useState(false);
  useEffect(() => {
    const element = ref.current;
    if (!element) return;
    const measure = () => setOverflowing(element.scrollWidth > element.clientWidth + 1);
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    for (const child of element.children) observer.observe(child);
    return () => observer.disconnect();
  }, []);
  return { ref, overflowing };
}

/**
 * A table that scrolls sideways on narrow screens, with paging links below it. The actions column
 * stays at the right edge, shadowed over the columns scrolled beneath it, so its buttons are always
 * reachable.
 */
export function DataTable<Row>({ caption, columns, rows, rowKey, paging }: DataTableProps<Row>) {
  const { ref, overflowing } = useOverflowing<HTMLDivElement>();
  const cellClass = (column: Column<Row>) => (column.actions ? "cell-actions" : undefined);
  return (
    <div ref={ref} className={overflowing ? "table-wrap table-overflowing" : "table-wrap"}>
      <table>
        <caption className="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.header} scope="col" className={cellClass(column)}>
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
                    <span className="cell-name">{column.cell(row)}</span>
                  </th>
                ) : (
                  <td key={column.header} className={cellClass(column)}>
                    {column.cell(row)}
                  </td>
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
