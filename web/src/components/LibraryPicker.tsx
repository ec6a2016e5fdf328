import { type ReactNode, useEffect, useState } from "react";
import { api, call, isMissing } from "../api.ts";
import { useLoad } from "../load.ts";
import { nameApart } from "./names.ts";
import { Empty, ErrorState, Loading } from "./States.tsx";

/** The picker lists this many libraries; an organization with more picks by search. */
const LIBRARY_PICKER_SIZE = 100;

interface LibraryPickerProps {
  /** The select's id; the search field's is `${id}-search`. */
  id: string;
  /** The chosen library's id (the page keeps it in its address), "" while none is chosen. */
  libraryId: string;
  /** The person chose a library ("" for the `placeholder` option). */
  onChoose: (libraryId: string) => void;
  /** Shown instead of the picker while the organization has no library. */
  noLibraries: ReactNode;
  /** The first option, choosing no library: for a page that shows nothing until one is chosen. */
  placeholder?: string;
  /** Called with the newest library while none is chosen: for a page that shows one at once. */
  onDefault?: (libraryId: string) => void;
  /**
   * Called with the organization's only library while none is chosen: for a page that waits for a
   * choice (`placeholder`) but has nothing to choose between.
   */
  onOnlyLibrary?: (libraryId: string) => void;
}

/**
 * Chooses the library a page works on. It lists the first 100 libraries that match its search (the
 * API's `search`), so any library can be chosen, and reads the chosen one on its own: it stays in the
 * picker whatever the search finds, and one the API does not know is named "Library not found".
 */
export function LibraryPicker({
  id,
  libraryId,
  onChoose,
  noLibraries,
  placeholder,
  onDefault,
  onOnlyLibrary,
}: LibraryPickerProps) {
  const [search, setSearch] = useState("");
  // Each answer names its search: while the next search loads, the previous answer is still shown.
  const libraries = useLoad(
    () =>
      call(
        api.GET("/v1/media/libraries", {
          params: { query: { page: 1, limit: LIBRARY_PICKER_SIZE, ...(search ? { search } : {}) } },
        }),
      ).then((list) => ({ ...list, search })),
    search,
  );
  const chosenLibrary = useLoad(
    () =>
      libraryId
        ? call(api.GET("/v1/media/libraries/{libraryId}", { params: { path: { libraryId } } })).then(
            (body) => body.data,
          )
        : Promise.resolve(undefined),
    libraryId,
  );
  const unsearched = !search && libraries.data?.search === "" ? libraries.data : undefined;
  const newest = unsearched?.data[0]?.id;
  const only = unsearched?.meta.pagination.total === 1 ? newest : undefined;
  useEffect(() => {
    if (!libraryId && newest) onDefault?.(newest);
  }, [libraryId, newest, onDefault]);
  useEffect(() => {
    if (!libraryId && only) onOnlyLibrary?.(only);
  }, [libraryId, only, onOnlyLibrary]);

  const found = libraries.data?.data ?? [];
  const chosen = chosenLibrary.data?.id === libraryId ? chosenLibrary.data : undefined;
  const options = chosen && !found.some((library) => library.id === chosen.id) ? [chosen, ...found] : found;
  const listed = options.some((library) => library.id === libraryId);
  const missing = chosenLibrary.state === "error" && isMissing(chosenLibrary.error);

  if (libraries.state === "loading") return <Loading what="Loading libraries" />;
  if (libraries.state === "error") return <ErrorState error={libraries.error} onRetry={libraries.reload} />;
  if (unsearched?.data.length === 0 && !libraryId) return <Empty>{noLibraries}</Empty>;
  // With one library there is nothing to search or to leave unchosen: the select shows just it.
  return (
    <div className="filters library-picker">
      {!only && (
        <div className="field">
          <label htmlFor={`${id}-search`}>Search libraries</label>
          <input
            id={`${id}-search`}
            type="search"
            value={search}
            onChange={(event) => setSearch(event.target.value)}
          />
        </div>
      )}
      <div className="field">
        <label htmlFor={id}>Library</label>
        <select id={id} value={libraryId} onChange={(event) => onChoose(event.target.value)}>
          {placeholder !== undefined && !only && <option value="">{placeholder}</option>}
          {/* The chosen library before it is read (its id stands in), or one that does not exist. */}
          {!listed && libraryId && (
            <option value={libraryId} disabled>
              {missing ? "Library not found" : libraryId}
            </option>
          )}
          {options.map((library) => (
            <option key={library.id} value={library.id}>
              {nameApart(library, options)}
            </option>
          ))}
        </select>
        {search && found.length === 0 && (
          <small className="field-hint" role="status">
            No {options.length > 0 ? "other " : ""}library matches the search.
          </small>
        )}
      </div>
    </div>
  );
}
