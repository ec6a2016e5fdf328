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
