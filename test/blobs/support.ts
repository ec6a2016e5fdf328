import { REMOVE_FILES_JOB } from "../../src/blobs/removals.ts";
import type { TestApp } from "../support/app.ts";

/** The app's durable file-removal jobs, as the refusal tests follow them. */
export const removalJobs = (app: TestApp) =>
  app.cumulo.store.db
    .selectFrom("jobs")
    .select(["id", "status", "attempts", "last_error"])
    .where("kind", "=", REMOVE_FILES_JOB)
    .execute();
