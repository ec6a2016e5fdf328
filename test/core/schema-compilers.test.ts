import { Type } from "@sinclair/typebox";
import type { FastifySchemaCompiler } from "fastify";
import { describe, expect, it } from "vitest";
import { LazySchemaCompilers, serializerOf } from "../../src/http/schema-compilers.ts";
import { validatorCompiler } from "../../src/http/validation.ts";
import { startTestApp } from "../support/app.ts";

const route = (schema: object, httpPart = "body") => ({ schema, method: "POST", url: "/x", httpPart });

/** `validatorCompiler`, counting its compiles. */
function countingCompiler() {
  const compiled: object[] = [];
  const compile: FastifySchemaCompiler<object> = (definition) => {
    compiled.push(definition.schema);
    return validatorCompiler(definition);
  };
  return { compile, compiled };
}

describe("route schemas compiled lazily", () => {
  it("compiles a validator on its first use only, with Ajv's errors and its parent data", () => {
    const compilers = new LazySchemaCompilers();
    const { compile, compiled } = countingCompiler();
    const body = Type.Object({ name: Type.String(), size: Type.Integer({ default: 3 }) });
    const validate = compilers.validator(compile)(route(body)) as ((
      data: unknown,
      parent?: object,
    ) => boolean) & {
      errors?: { keyword: string; instancePath: string }[] | null;
    };
    expect(compiled).toEqual([]);
    const data: Record<string, unknown> = { name: "a" };
    expect(validate(data, { parentData: { body: data }, parentDataProperty: "body" })).toBe(true);
    // Ajv's defaults were applied to the data given.
    expect(data.size).toBe(3);
    expect(validate({ name: 7 })).toBe(false);
    expect(validate.errors?.map((error) => [error.keyword, error.instancePath])).toEqual([["type", "/name"]]);
    expect(validate({ name: "b" })).toBe(true);
    expect(compiled).toEqual([body]);
  });

  it("keeps the query validator's own checks (decimal text only)", () => {
    const compilers = new LazySchemaCompilers();
    const query = Type.Object({ limit: Type.Integer() });
    const validate = compilers.validator(validatorCompiler)(route(query, "querystring")) as ((
      data: unknown,
    ) => boolean) & { errors?: { keyword: string }[] | null };
    expect(validate({ limit: "0x10" })).toBe(false);
    expect(validate.errors?.[0]?.keyword).toBe("type");
    const coerced: Record<string, unknown> = { limit: "16" };
    expect(validate(coerced)).toBe(true);
    expect(coerced.limit).toBe(16);
  });

  it("serializes as fast-json-stringify does, one compiled function per schema", () => {
    const schema = Type.Object({ id: Type.Integer(), name: Type.String() });
    const first = new LazySchemaCompilers().serializer({
      schema,
      method: "GET",
      url: "/a",
      httpStatus: "200",
    });
    const second = new LazySchemaCompilers().serializer({
      schema,
      method: "GET",
      url: "/b",
      httpStatus: "200",
    });
    // Fields the schema does not name are left out; numbers keep their schema type.
    expect(first({ id: 1, name: "one", secret: "x" })).toBe('{"id":1,"name":"one"}');
    expect(second({ id: 2, name: "two" })).toBe('{"id":2,"name":"two"}');
    // Both apps' routes use the one function compiled for the schema; another schema gets its own.
    expect(serializerOf(schema)).toBe(serializerOf(schema));
    expect(serializerOf(Type.Object({ id: Type.Integer() }))).not.toBe(serializerOf(schema));
  });

  it("compiles the rest when asked, and a schema that does not compile rejects", async () => {
    const compilers = new LazySchemaCompilers();
    const { compile, compiled } = countingCompiler();
    const body = Type.Object({ name: Type.String() });
    compilers.validator(compile)(route(body));
    await compilers.compileRemaining();
    expect(compiled).toEqual([body]);

    const broken = new LazySchemaCompilers();
    const validate = broken.validator(compile)(
      route({ type: "object", properties: { name: { $ref: "#/nowhere" } } }),
    );
    // A failed compile (here the route's first request) leaves the schema to fail again.
    expect(() => validate({ name: "a" })).toThrow();
    await expect(broken.compileRemaining()).rejects.toThrow();
  });

  it("every route of the API compiles", async () => {
    const t = await startTestApp();
    try {
      expect(t.cumulo.app).toBeDefined();
      await t.cumulo.app?.compileSchemas();
      // Routes answer as before once everything is compiled.
      const listed = await t.request("GET", "/v1/media/libraries?limit=1");
      expect(listed.status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
