import type { FastifyRequest } from "fastify";

/**
 * The organization a request acts for when it presents no key: a resumable upload signed by an
 * upload authorization acts for its video's organization. Developer mode records it there.
 */
export const actingOrganization = new WeakMap<FastifyRequest, string>();

/** The organization the request authenticated as, or acts for. */
export const organizationOfRequest = (request: FastifyRequest): string | undefined =>
  request.auth?.organizationId ?? actingOrganization.get(request);
