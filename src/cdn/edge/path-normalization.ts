/**
 * A request's path and query in the one form RFC 3986 (6.2.2) counts equivalent spellings as:
 * percent-encoded unreserved characters decoded (`%7E` is `~`, `%41` is `A`), the other escapes'
 * hex digits upper-cased (`%2f` is `%2F`, never decoded: reserved characters keep their meaning),
 * then the path's dot segments removed (`/a/./b` and `/a/x/../b` are `/a/b`, RFC 3986 5.2.4, never
 * above the root). The cache key, the origin request and purges all use this form, so no spelling of
 * a path escapes a purge of it. A fragment (`#...`), which no client should send, is dropped. Strings
 * without `#`, `%` or `/.` are already normal and returned as they are (the cache-hit path pays three
 * scans).
 */
export function normalizedPathAndQuery(target: string): string {
  // A fragment is no part of a request target (RFC 9112, 3.2): the origin is never asked for one.
  const fragmentAt = target.indexOf("#");
  const pathAndQuery = fragmentAt === -1 ? target : target.slice(0, fragmentAt);
  if (!pathAndQuery.includes("%") && !pathAndQuery.includes("/.")) return pathAndQuery;
  const queryAt = pathAndQuery.indexOf("?");
  const path = queryAt === -1 ? pathAndQuery : pathAndQuery.slice(0, queryAt);
  const query = queryAt === -1 ? "" : pathAndQuery.slice(queryAt);
  return withoutDotSegments(normalizedEscapes(path)) + normalizedEscapes(query);
}

const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

function normalizedEscapes(text: string): string {
  if (!text.includes("%")) return text;
  return text.replace(ESCAPE, (_escape, hex: string) => {
    const character = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(character) ? character : `%${hex.toUpperCase()}`;
  });
}

/** RFC 3986 5.2.4 for an absolute path: `.` segments dropped, `..` drops the segment before it. */
function withoutDotSegments(path: string): string {
  if (!path.startsWith("/") || !path.includes("/.")) return path;
  const segments = path.slice(1).split("/");
  const last = segments.length - 1;
  const kept: string[] = [];
  for (const [index, segment] of segments.entries()) {
    if (segment !== "." && segment !== "..") {
      kept.push(segment);
      continue;
    }
    if (segment === "..") kept.pop();
    // A path ending in a dot segment names a directory: `/a/b/..` is `/a/`.
    if (index === last) kept.push("");
  }
  return `/${kept.join("/")}`;
}
