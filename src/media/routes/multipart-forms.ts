import { Type } from "@sinclair/typebox";
import type { FastifySchemaCompiler } from "fastify";
import { validatorCompiler } from "../../http/validation.ts";

/**
 * Bodies read by the handler (streamed, with limits) have schemas that document the request in
 * OpenAPI only; params and query still validate as everywhere else.
 */
export const documentedBodyOnly: FastifySchemaCompiler<object> = (route) =>
  route.httpPart === "body" ? () => true : validatorCompiler(route);

export const BinaryFile = Type.String({ format: "binary" });
