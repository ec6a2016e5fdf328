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
 * `Location` of what a POST to a collection created: the collection's path as the request named it
 * (without its query) and the new id, which a GET answers.
 */
export const createdAt = (request: FastifyRequest, id: string): string =>
  `${request.url.replace(/[?#].*$/s, "").replace(/\/+$/, "")}/${id}`;
