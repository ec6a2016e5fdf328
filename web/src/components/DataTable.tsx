import { type FocusEvent, type ReactNode, useEffect, useLayoutEffect, useRef, useState } from "react";
import { WrapPoints } from "./WrapPoints.tsx";

export interface Column<Row> {
  header: string;
  cell: (row: Row) => ReactNode;
  /** Cells of this column are the row's heading for screen readers. */
  rowHeader?: boolean;
  /** The row's buttons: kept in view at the right edge when the table scrolls sideways, a card's foot on a phone. */
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

/** The controls of a table body's cells: the one in the same place of the next row takes the focus. */
const CONTROLS = "a[href], button:not([disabled]), input:not([disabled]), select:not([disabled])";

/**
 * When the row holding the focus leaves the table (its Delete or Revoke was confirmed and the list
 * read again), the focus goes to the same control of the row now in its place (or the new last row),
 * as lists of mail or files do, rather than to the document: a screen reader then says where the
 * person is, and Enter or Tab goes on from there. When the row stays but its focused button is now
 * disabled (a player's "Mark default"), the focus goes to the button before it in the same cell.
 * A table left without rows is Layout's to handle.
 */
function useFocusKeptInRows<Row>(rows: Row[], rowKey: (row: Row) => string | number) {
  const body = useRef<HTMLTableSectionElement>(null);
  const focused = useRef<{
    key: string | number;
    index: number;
    column: number;
    control: number;
    element: HTMLElement;
  }>(undefined);
  const onFocus = (event: FocusEvent<HTMLTableSectionElement>) => {
    const cell = event.target.closest("td, th");
    const row = cell?.parentElement;
    const index = row && body.current ? Array.prototype.indexOf.call(body.current.rows, row) : -1;
    const shown = rows[index];
    const control = cell ? [...cell.querySelectorAll(CONTROLS)].indexOf(event.target) : -1;
    focused.current =
      cell instanceof HTMLTableCellElement && shown !== undefined && event.target instanceof HTMLElement
        ? { key: rowKey(shown), index, column: cell.cellIndex, control, element: event.target }
        : undefined;
  };
  const onBlur = (event: FocusEvent<HTMLTableSectionElement>) => {
    // Gone elsewhere (a dialog, another control); a removed row's blur has no next target.
    if (event.relatedTarget && !body.current?.contains(event.relatedTarget)) focused.current = undefined;
  };
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs when the rows change, by design
  useLayoutEffect(() => {
    const last = focused.current;
    const active = document.activeElement;
    if (!last || (active !== null && active !== document.body && active !== last.element)) return;
    const kept = rows.findIndex((row) => rowKey(row) === last.key);
    if (kept >= 0 && last.element.isConnected && !last.element.matches(":disabled")) return;
    focused.current = undefined;
    const row = body.current?.rows[kept >= 0 ? kept : Math.min(last.index, rows.length - 1)];
    const inCell = [...(row?.cells[last.column]?.querySelectorAll<HTMLElement>(CONTROLS) ?? [])];
    // Same row: the controls before the disabled one are where they were.
    const place = kept >= 0 ? Math.max(0, last.control - 1) : last.control;
    const target = inCell[place] ?? inCell[0] ?? row?.querySelector<HTMLElement>(CONTROLS);
    target?.focus();
  }, [rows]);
  return { body, onFocus, onBlur };
}

/**
 * A table with paging links below it. Wider than its panel (a tablet), it scrolls sideways and the
 * actions column stays at the right edge, shadowed over the columns scrolled beneath it, so its
 * buttons are always reachable. On a phone each row is a card instead (styles.css, `.data-table`):
 * the row's name its title, every other cell at the card's width with its column's name
 * (`data-label`) beside it, the actions at its foot.
 */
export function DataTable<Row>({ caption, columns, rows, rowKey, paging }: DataTableProps<Row>) {
  const { ref, overflowing } = useOverflowing<HTMLDivElement>();
  const focusKept = useFocusKeptInRows(rows, rowKey);
  const cellClass = (column: Column<Row>) => (column.actions ? "cell-actions" : undefined);
  return (
    <div ref={ref} className={overflowing ? "table-wrap table-overflowing" : "table-wrap"}>
      <table className="data-table">
        {/* Captions name host names and ids ("Purges of cdn.example.com"): shown without the
            page's styles (a reader view), they wrap at their dots and slashes like the headings. */}
        <caption className="visually-hidden">
          <WrapPoints text={caption} />
        </caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.header} scope="col" className={cellClass(column)}>
                {column.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody ref={focusKept.body} onFocus={focusKept.onFocus} onBlur={focusKept.onBlur}>
          {rows.map((row) => (
            <tr key={rowKey(row)}>
              {columns.map((column) =>
                column.rowHeader ? (
                  <th key={column.header} scope="row">
                    <span className="cell-name">{column.cell(row)}</span>
                  </th>
                ) : (
                  <td key={column.header} className={cellClass(column)} data-label={column.header}>
                    {/* One box for whatever the cell holds: on a phone it is the card's value beside the label. */}
                    <span className="cell-value">{column.cell(row)}</span>
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
