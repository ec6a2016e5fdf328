import type { FastifyRequest } from "fastify";
import type { PageMeta } from "./schemas.ts";

export const ok = <T>(message: string, data: T) => ({ success: true as const, message, data });

export const okList = <T>(message: string, data: T[], meta: PageMeta) => ({
  success: true as const,
  message,
  data,
  meta,
});

export const okMessage = (message: string) => ({ success: true as const, message });

/**
 * The path of the route that answered, its parameters as validation left them: ids in lower case
 * as every answer carries them, whatever case, percent-encoding, trailing slash or absolute-form
 * target the request used. List links and `Location` are built on it.
 */
export const routePath = (request: FastifyRequest): string => {
  const params = request.params as Record<string, string | undefined>;
  return (request.routeOptions.url ?? "").replace(/:(\w+)/g, (_, name: string) =>
    encodeURIComponent(params[name] ?? ""),
  );
};

/** `Location` of what a POST to a collection created: the collection's path and the new id, which a GET answers. */
export const createdAt = (request: FastifyRequest, id: string): string => `${routePath(request)}/${id}`;
