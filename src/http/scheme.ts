import type { FastifyRequest } from "fastify";

/**
 * The scheme the client used: the connection's, or the one a trusted proxy names in
 * `X-Forwarded-Proto`, lower-cased. Schemes are case-insensitive (RFC 3986 3.1) and Fastify passes
 * the header on as sent, so a proxy saying `HTTPS` was taken for plain HTTP (the session cookie lost
 * `Secure`).
 */
export const schemeOf = (request: FastifyRequest): string => request.protocol.toLowerCase();
