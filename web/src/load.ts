import { useCallback, useEffect, useRef, useState } from "react";

export type Loaded<T> =
  | { state: "loading"; data: undefined; error: undefined }
  | { state: "ready"; data: T; error: undefined }
  | { state: "error"; data: undefined; error: unknown };

/**
 * Runs `load` when `key` changes and on `reload()`; answers of a superseded run are dropped, so a
 * slow first page cannot overwrite the second.
 */
export function useLoad<T>(load: () => Promise<T>, key: string): Loaded<T> & { reload: () => void } {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: "loading", data: undefined, error: undefined });
  const [round, setRound] = useState(0);
  const latest = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  // biome-ignore lint/correctness/useExhaustiveDependencies: `key` and `round` are the triggers by design
  useEffect(() => {
    const run = ++latest.current;
    setLoaded((previous) =>
      previous.state === "ready" ? previous : { state: "loading", data: undefined, error: undefined },
    );
    loadRef.current().then(
      (data) => run === latest.current && setLoaded({ state: "ready", data, error: undefined }),
      (error: unknown) => run === latest.current && setLoaded({ state: "error", data: undefined, error }),
    );
  }, [key, round]);
  const reload = useCallback(() => setRound((value) => value + 1), []);
  return { ...loaded, reload };
}

interface PageOfRows {
  data: unknown[];
  meta: { pagination: { page: number; total: number; total_pages: number } };
}

/**
 * A list page past the end (its last rows deleted meanwhile, or an old link's `?page=99`) while rows
 * exist: `goTo` is called with the last page that has rows. Answers whether the page is past the end.
 */
export function useLastPageWhenPastEnd(
  list: Loaded<PageOfRows>,
  page: number,
  goTo: (page: number) => void,
): boolean {
  const pagination = list.data?.meta.pagination;
  const pastEnd =
    list.state === "ready" &&
    pagination?.page === page &&
    list.data.data.length === 0 &&
    pagination.total > 0 &&
    page > 1;
  const lastPage = pagination?.total_pages ?? 1;
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs when an answer says the page is past the end
  useEffect(() => {
    if (pastEnd) goTo(Math.max(1, Math.min(lastPage, page - 1)));
  }, [pastEnd]);
  return pastEnd;
}
