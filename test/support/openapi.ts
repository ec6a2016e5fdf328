/** A node of an OpenAPI document, read loosely. */
export type OpenApiNode = Record<string, unknown>;

/** `value` itself, or the node its `$ref` points to (followed through further references) in `document`. */
export function resolveIn(document: OpenApiNode) {
  const resolve = (value: unknown): OpenApiNode => {
    const ref = (value as OpenApiNode).$ref;
    if (typeof ref !== "string") return value as OpenApiNode;
    return resolve(
      ref
        .split("/")
        .slice(1)
        .reduce<unknown>((node, key) => (node as OpenApiNode)[key], document),
    );
  };
  return resolve;
}
