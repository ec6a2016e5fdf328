import type { Compilable, CompiledQuery, QueryResult } from "kysely";
import { LRUCache } from "lru-cache";
import type { Executor } from "./transactions.ts";

/** Stands where a prepared query takes a value; `read` picks that value out of each run's values. */
class Placeholder<Values> {
  constructor(readonly read: (values: Values) => unknown) {}
}

/** Marks a value of a prepared query: typed as the value it stands for, so the query builder accepts it. */
export type ValueOf<Values> = <T>(read: (values: Values) => T) => T;

/**
 * A query built and compiled by Kysely once, then run many times with new values: building and
 * compiling a statement costs several times what SQLite takes to run a small one (docs/performance.md,
 * session 4). `build` writes the query with `value(read)` wherever it takes a value. A query whose
 * text depends on the values (a list of `n` ids, `n` rows) names that in `shape`, and is compiled
 * once per shape. Compiled for the dialect of the store it is first run on: keep one per store.
 */
export class PreparedQuery<Values, Row> {
  readonly #compiled = new LRUCache<string, CompiledQuery<Row>>({ max: 64 });

  constructor(
    private readonly build: (value: ValueOf<Values>, values: Values) => Compilable<Row>,
    private readonly shape: (values: Values) => string = () => "",
  ) {}

  execute(executor: Executor, values: Values): Promise<QueryResult<Row>> {
    const shape = this.shape(values);
    let compiled = this.#compiled.get(shape);
    if (!compiled) {
      const value = <T>(read: (values: Values) => T) => new Placeholder(read) as T;
      compiled = this.build(value, values).compile();
      this.#compiled.set(shape, compiled);
    }
    const parameters = compiled.parameters.map((parameter) =>
      parameter instanceof Placeholder ? parameter.read(values) : parameter,
    );
    return executor.executeQuery({ ...compiled, parameters });
  }

  /** The first row of a run, or undefined (as Kysely's `executeTakeFirst`). */
  async first(executor: Executor, values: Values): Promise<Row | undefined> {
    return (await this.execute(executor, values)).rows[0];
  }
}

/** The columns `row` gives a value: the shape of a prepared insert of it (Kysely leaves undefined ones out). */
export const columnsOf = (row: object): string[] =>
  Object.entries(row)
    .filter(([, given]) => given !== undefined)
    .map(([column]) => column);

/**
 * `row`'s given columns, each standing for its value in a prepared insert or update, where `rowOf`
 * picks the row out of each run's values: `.values(valuesOf(value, row, (values) => values))`. For
 * plain values only: an expression (a `sql` template) in the row would be bound as a value.
 */
export function valuesOf<Values, Row extends object>(
  value: ValueOf<Values>,
  row: Row,
  rowOf: (values: Values) => Row,
): Row {
  const placeholders: Record<string, unknown> = {};
  for (const column of columnsOf(row)) {
    placeholders[column] = value((values) => rowOf(values)[column as keyof Row]);
  }
  return placeholders as Row;
}
