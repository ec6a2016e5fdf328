/**
 * The request's URL with each path segment that cannot be percent-decoded (`%zz`, `%FF`, an encoded
 * lone surrogate) taken as its literal text (`%` escaped as `%25`): the router then reaches the route
 * the path names, whose parameter is a malformed id there (404 in the group's body: a cloud path's
 * `Disk not found`, not the gateway's "no route" its decoding failure gave).
 */
export function withUndecodableSegmentsLiteral(url: string): string {
  const queryAt = url.indexOf("?");
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  if (!path.includes("%")) return url;
  const literal = path
    .split("/")
    .map((segment) => (decodes(segment) ? segment : segment.replaceAll("%", "%25")))
    .join("/");
  return queryAt === -1 ? literal : literal + url.slice(queryAt);
}

function decodes(segment: string): boolean {
  try {
    decodeURIComponent(segment);
    return true;
  } catch {
    return false;
  }
}
