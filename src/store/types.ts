import type { ColumnType, Generated } from "kysely";

/** ISO-8601 UTC text in both stores (PostgreSQL timestamptz is parsed back to the same text). */
export type Timestamp = string;
/** true/false on PostgreSQL, 1/0 on SQLite: read with `readBool`. */
export type Bool = ColumnType<boolean | number, boolean, boolean>;
/** JSON text in both stores: write with `writeJson`, read with `readJson`. */
export type JsonText = string;
export type Serial = Generated<number>;
