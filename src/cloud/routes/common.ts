import { type TProperties, Type } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import { ApiError } from "../../http/errors.ts";
import type { CloudServices } from "../index.ts";
import type { Caller } from "../locations.ts";
import type { Conflict, Forbidden, Invalid, NotFound, Rejected } from "../outcome.ts";

/** Where a registration of the cloud routes lives; the same routes answer under four prefixes. */
export type CloudPrefix = "/v1" | "/v1/:location" | "/v1/cloud" | "/v1/cloud/:location";

export const CLOUD_PREFIXES: readonly CloudPrefix[] = [
  "/v1",
  "/v1/:location",
  "/v1/cloud",
  "/v1/cloud/:location",
];

export interface CloudRouteOptions {
  cloud: CloudServices;
  at: CloudPrefix;
}

const SECURITY: { [label: string]: string[] }[] = [{ cloudApiKey: [] }, { apiKeyHeader: [] }];

/** Every cloud body is accepted in both encodings (pipeline.ts). */
const CONSUMES = ["application/x-www-form-urlencoded", "application/json"];

/** The schema pieces that differ between the four registrations of the cloud routes. */
export function routeKit(at: CloudPrefix) {
  const located = at.endsWith(":location");
  // /v1 and /v1/{location} are documented; the /v1/cloud aliases answer the same but stay out of the document.
  const hidden = at.startsWith("/v1/cloud");
  const params = <T extends TProperties>(properties: T) =>
    Type.Object({
      ...(located
        ? { location: Type.String({ description: "Location slug (GET /v1/config/locations)" }) }
        : {}),
      ...properties,
    });
  return {
    params,
    noParams: located ? { params: params({}) } : {},
    doc: (operationId: string, tag: string, summary: string) => ({
      operationId: `${operationId}${located ? "AtLocation" : ""}`,
      tags: [`cloud: ${tag}`],
      summary,
      security: SECURITY,
      consumes: CONSUMES,
      ...(hidden ? { hide: true } : {}),
    }),
  };
}

/** The caller of a location-bound operation, at the request's location (or the default one). */
export const callerOf = (cloud: CloudServices, request: FastifyRequest): Caller =>
  cloud.locations.caller(request.auth, (request.params as { location?: string }).location);

/** The contract's error for a failed cloud operation. */
export function cloudError(failure: NotFound | Conflict | Invalid | Forbidden | Rejected): ApiError {
  switch (failure.outcome) {
    case "not_found":
      return ApiError.notFound(failure.thing);
    case "conflict":
    case "rejected":
      return ApiError.conflict(failure.message);
    case "invalid":
      return ApiError.field(failure.field, "validation_format", failure.message);
    case "forbidden":
      return ApiError.forbidden(failure.message);
  }
}

export const SUCCESS = { success: true as const };
