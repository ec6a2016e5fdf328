import fastJsonStringify from "fast-json-stringify";
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifySchemaCompiler,
  FastifySerializerCompiler,
} from "fastify";
import { validatorCompiler } from "./validation.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** Compiles every route schema no request has needed yet (what the server does after listening). */
    compileSchemas(): Promise<void>;
  }
}

type Validate = ReturnType<FastifySchemaCompiler<object>>;
type Serialize = ReturnType<FastifySerializerCompiler<object>>;

/**
 * A response schema's serializer, kept by schema object: every app built in a process (the tests
 * build hundreds) shares one compiled function per schema instead of compiling its own. The
 * serializer depends on the schema alone: the API adds no shared schemas and no serializer options.
 */
const serializers = new WeakMap<object, Serialize>();

export const serializerOf = (schema: object): Serialize => {
  let serialize = serializers.get(schema);
  if (!serialize) {
    serialize = fastJsonStringify(schema);
    serializers.set(schema, serialize);
  }
  return serialize;
};

/**
 * Route validators and response serializers compiled when first used rather than while the app is
 * built, where compiling all of them took about a third of a server's start (docs/performance.md,
 * session 37). Once the server listens, `compileRemaining` compiles the rest one schema per turn of
 * the event loop, so requests rarely wait for a compile and a broken schema still shows at start.
 */
export class LazySchemaCompilers {
  /** Compiles each schema whose validator or serializer nothing has asked for yet. */
  readonly #pending = new Set<() => unknown>();
  #stopped = false;

  /** `compile`, run on a route's first request (or by `compileRemaining`). */
  validator(compile: FastifySchemaCompiler<object>): FastifySchemaCompiler<object> {
    return (route) => {
      const compiled = this.#lazily(() => compile(route));
      // Fastify reads a failed validation's reasons from the function's `errors`, as Ajv leaves them,
      // and gives an Ajv function (one with `schemaEnv`) the request as the data's parent, so that it
      // may replace the data itself: the wrapper says it is one and passes that on (a validator
      // of ours that is not Ajv's own function takes the data alone and ignores it).
      const validate = Object.assign(
        (data: unknown, parent?: unknown) => {
          const run = compiled() as Validate & ((data: unknown, parent?: unknown) => unknown);
          const valid = run(data, parent);
          validate.errors = (run as { errors?: unknown }).errors;
          return valid;
        },
        { errors: undefined as unknown, schemaEnv: true },
      );
      return validate as Validate;
    };
  }

  /** fast-json-stringify, as Fastify's default compiler uses it, run on a route's first answer. */
  readonly serializer: FastifySerializerCompiler<object> = ({ schema }) => {
    const serialize = this.#lazily(() => serializerOf(schema));
    return (data) => serialize()(data);
  };

  /**
   * `make`'s result, made on the first call (or by `compileRemaining`) and kept. One that throws stays
   * pending: every later call, and `compileSchemas`, meets the error again.
   */
  #lazily<T>(make: () => T): () => T {
    let made: T | undefined;
    const compileNow = () => {
      made ??= make();
      this.#pending.delete(compileNow);
      return made;
    };
    this.#pending.add(compileNow);
    return () => made ?? compileNow();
  }

  /**
   * Compiles what no request has needed yet, one schema per turn of the event loop; stops early once
   * `stop` is called (the app is closing). A schema that does not compile rejects the promise.
   */
  async compileRemaining(): Promise<void> {
    for (const compileNow of this.#pending) {
      if (this.#stopped) return;
      await new Promise((resolve) => setImmediate(resolve));
      if (this.#pending.has(compileNow)) compileNow();
    }
  }

  stop(): void {
    this.#stopped = true;
  }
}

/**
 * Installs the API's validators (`validatorCompiler`) and fast-json-stringify as lazy compilers on the
 * app, before its routes are added; the rest is compiled in idle turns once it listens, until it
 * closes. Routes with a compiler of their own (the multipart forms) compile as Fastify builds them.
 */
export function registerLazySchemaCompilers(app: FastifyInstance, logger: FastifyBaseLogger): void {
  const compilers = new LazySchemaCompilers();
  app.setValidatorCompiler(compilers.validator(validatorCompiler));
  app.setSerializerCompiler(compilers.serializer);
  app.decorate("compileSchemas", () => compilers.compileRemaining());
  app.addHook("onListen", (done) => {
    compilers
      .compileRemaining()
      .catch((error: unknown) => logger.error({ err: error }, "a route's schema does not compile"));
    done();
  });
  app.addHook("preClose", (done) => {
    compilers.stop();
    done();
  });
}
