import { CompiledQuery, type DatabaseConnection, type QueryResult } from "kysely";

/** The name of each grouped transaction's savepoint. */
const SAVEPOINT = "cumulo_grouped_write";
/** Statements that run inside an open transaction as they would outside one. */
const RUNS_IN_GROUP = /^\s*(?:select|insert|update|delete|with|replace|values)\b/i;
const WRITES = /^\s*(?:insert|update|delete|replace)\b/i;
const BEGIN = /^\s*begin\s+immediate\s*$/i;
const COMMIT = /^\s*commit\s*$/i;
const ROLLBACK = /^\s*rollback\s*$/i;
/** A group is committed before a lease beyond this many would join it, */
const MAX_GROUP_LEASES = 64;
/** or once it has been open this long: other processes wait for SQLite's write lock meanwhile. */
const MAX_GROUP_MS = 5;

interface Group {
  committed: Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
  leases: number;
  openedAt: number;
}

function openGroup(): Group {
  let resolve = () => {};
  let reject: (error: unknown) => void = () => {};
  const committed = new Promise<void>((done, fail) => {
    resolve = done;
    reject = fail;
  });
  // A group none of whose leases is left waiting for it must not fail the process.
  committed.catch(() => {});
  return { committed, resolve, reject, leases: 0, openedAt: performance.now() };
}

/**
 * Group commit on SQLite's one connection: writes that reach the connection in the same turn of the
 * event loop, or while it is busy, share one commit. A commit writes every page its transaction
 * touched to the WAL (two writes each): for a small write, about two thirds of its cost, the same for
 * a group as for one (docs/performance.md, session 52).
 *
 * A lease of the connection whose first statement begins a transaction (Kysely's
 * `transaction().execute()`) or writes (an insert on its own) opens a `begin immediate` transaction,
 * or joins the one open; a transaction becomes a savepoint in it. The group is committed once no
 * lease waits for the connection, after the event loop's turn (requests read from the network in the
 * same turn join it), or before a statement that must run outside a transaction (a pragma, another
 * `begin`), or once it is large or old. Each transaction keeps its own all-or-nothing: one that fails
 * is rolled back to its savepoint and the others kept; a statement that fails alone is undone alone,
 * as outside a transaction.
 *
 * Nothing is told done before it is committed: every lease that ran a statement in a group (reads
 * too: they saw its writes) waits, after giving the connection back, for that group's commit, and
 * fails with it; an error after which SQLite rolls back the whole transaction by itself (a full disk)
 * fails every lease of the group.
 *
 * It works on the statements the driver sends (`begin immediate`, `commit`, `rollback`), so that a
 * `begin` retried while another process holds the write lock joins a group opened meanwhile.
 */
export class SqliteGroupCommit {
  #group: Group | undefined;
  /** The group the current lease ran a statement in: it waits for its commit. */
  #leaseGroup: Group | undefined;
  /** Statements the current lease has run. */
  #leaseStatements = 0;
  /** The current lease's transaction is a savepoint of the group, not yet ended. */
  #grouped = false;
  /** The current lease's grouped transaction has ended: any further statement commits the group first. */
  #groupedEnded = false;
  #commitAsked = false;

  constructor(
    private readonly connection: DatabaseConnection,
    private readonly inTransaction: () => boolean,
    private readonly othersWaiting: () => boolean,
    /** Takes the connection when it is free and calls `commitOpen()`. */
    private readonly commitWhenFree: () => void,
    /**
     * Forgets every kept read (`SqliteReadCache`): reads made in a group that is lost saw its rows.
     * A ROLLBACK forgets them too, but SQLite, rolling back by itself, runs none.
     */
    private readonly forgetReads: () => void,
  ) {}

  /** The connection the driver's statements go through. */
  readonly grouping: DatabaseConnection = {
    executeQuery: <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
      const text = query.sql;
      if (BEGIN.test(text) && this.#leaseStatements === 0) return this.#begin<R>();
      if (this.#grouped) {
        if (COMMIT.test(text)) return this.#endGrouped<R>(`release ${SAVEPOINT}`);
        if (ROLLBACK.test(text)) return this.#rollBackGrouped<R>();
        // Inside the transaction, every statement runs as it would in a transaction of its own.
        return this.#run<R>(query);
      }
      if (this.#group && (this.#groupedEnded || !RUNS_IN_GROUP.test(text) || this.#full())) this.#commit();
      // A write that is its lease's only business (an insert committed by itself) joins a group too.
      if (!this.#group && this.#leaseStatements === 0 && WRITES.test(text)) this.#open();
      return this.#run<R>(query);
    },
    streamQuery: (query, chunkSize) => {
      this.#ran();
      return this.connection.streamQuery(query, chunkSize);
    },
  };

  /**
   * The lease ends. With no other lease waiting to join the group, its commit is asked for after this
   * turn of the event loop's I/O. Answers what the lease waits for.
   */
  endLease(): Promise<void> | undefined {
    const waitFor = this.#leaseGroup;
    this.#leaseGroup = undefined;
    this.#leaseStatements = 0;
    this.#grouped = false;
    this.#groupedEnded = false;
    if (this.#group && !this.othersWaiting() && !this.#commitAsked) {
      this.#commitAsked = true;
      setImmediate(() => {
        this.#commitAsked = false;
        this.commitWhenFree();
      });
    }
    return waitFor?.committed;
  }

  /** Commits the open group, if any: the caller holds the connection, and no lease is running. */
  commitOpen(): void {
    this.#commit();
  }

  /**
   * The store closes: an open group is committed, unless one of its transactions is still running
   * (closing the connection rolls it back): then every lease of the group fails.
   */
  close(): void {
    if (!this.#grouped) {
      this.#commit();
      return;
    }
    if (this.#group)
      this.#fail(this.#group, new Error("the store was closed while a transaction was running"));
  }

  #begin<R>(): Promise<QueryResult<R>> {
    if (this.#group && this.#full()) this.#commit();
    if (!this.#group) this.#open();
    const result = this.#run<R>(CompiledQuery.raw(`savepoint ${SAVEPOINT}`));
    this.#grouped = true;
    return result;
  }

  /** Throws SQLITE_BUSY while another process holds the write lock: the driver tries again later. */
  #open(): void {
    this.connection.executeQuery(CompiledQuery.raw("begin immediate"));
    this.#group = openGroup();
  }

  #endGrouped<R>(text: string): Promise<QueryResult<R>> {
    this.#grouped = false;
    this.#groupedEnded = true;
    return this.#run<R>(CompiledQuery.raw(text));
  }

  #rollBackGrouped<R>(): Promise<QueryResult<R>> {
    this.#run(CompiledQuery.raw(`rollback to ${SAVEPOINT}`));
    return this.#endGrouped<R>(`release ${SAVEPOINT}`);
  }

  #full(): boolean {
    const group = this.#group as Group;
    return group.leases >= MAX_GROUP_LEASES || performance.now() - group.openedAt > MAX_GROUP_MS;
  }

  #ran(): void {
    this.#leaseStatements++;
    if (this.#group && this.#leaseGroup !== this.#group) {
      this.#leaseGroup = this.#group;
      this.#group.leases++;
    }
  }

  // Kysely's SQLite connection throws at once rather than rejecting: the usual path adds no promise.
  #run<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    try {
      const result = this.connection.executeQuery<R>(query);
      this.#ran();
      return result;
    } catch (error) {
      // A failure too is answered only once the group it met is committed: it may have met another
      // transaction's write (a duplicate name) that the group's loss takes back.
      this.#ran();
      // SQLite rolled the whole transaction back by itself: every transaction of the group failed.
      if (this.#group && !this.inTransaction()) {
        this.#fail(this.#group, error);
        this.#grouped = false;
      }
      throw error;
    }
  }

  #commit(): void {
    const group = this.#group;
    if (!group) return;
    this.#group = undefined;
    try {
      this.connection.executeQuery(CompiledQuery.raw("commit"));
      group.resolve();
    } catch (error) {
      try {
        if (this.inTransaction()) this.connection.executeQuery(CompiledQuery.raw("rollback"));
      } catch {
        // The group fails with the commit's error; a rollback failing too (an I/O error) adds
        // nothing, and thrown from the commit asked for after a loop turn it would end the process.
      }
      this.#fail(group, error);
    }
  }

  /** The group's writes are gone: so is every read kept meanwhile, and every lease in it fails. */
  #fail(group: Group, error: unknown): void {
    if (this.#group === group) this.#group = undefined;
    this.forgetReads();
    group.reject(error);
  }
}
