import type { JsonText, Timestamp } from "../store/types.ts";

export type JobStatus = "pending" | "running" | "done" | "failed";

export interface JobTable {
  id: string;
  kind: string;
  payload: JsonText;
  status: JobStatus;
  run_at: Timestamp;
  attempts: number;
  max_attempts: number;
  locked_until: Timestamp | null;
  last_error: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface JobTables {
  jobs: JobTable;
}
