/**
 * Reads a query string or a form-urlencoded body as the WHATWG URL standard does (`URLSearchParams`):
 * `+` is a space, escaped bytes that are not UTF-8 become U+FFFD, and a `%` without two hex digits is
 * kept as it is. A repeated key gives an array of its values. Fastify's own parser kept a whole value
 * undecoded (`%FF` as three characters) when one of its escapes was not UTF-8. `name[]`, as axios,
 * jQuery and qs write a list, is `name`.
 */
export function parseFormText(text: string): Record<string, string | string[]> {
  const fields: Record<string, string | string[]> = Object.create(null);
  for (const [name, value] of new URLSearchParams(text)) {
    const key = name.endsWith("[]") ? name.slice(0, -2) : name;
    const current = fields[key];
    if (current === undefined) fields[key] = value;
    else if (Array.isArray(current)) current.push(value);
    else fields[key] = [current, value];
  }
  return fields;
}
