import type { FastifyRequest } from "fastify";

/**
 * The organization a tus request acts for once its upload checked out: its video's. A request signed
 * by an upload authorization presents no key, so this is the only organization it names; developer
 * mode records it there.
 */
export const actingOrganization = new WeakMap<FastifyRequest, string>();

/** The organization the request authenticated as, or acts for. */
export const organizationOfRequest = (request: FastifyRequest): string | undefined =>
  request.auth?.organizationId ?? actingOrganization.get(request);
