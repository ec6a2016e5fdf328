import type { CdnTables } from "../cdn/tables.ts";
import type { CloudTables } from "../cloud/tables.ts";
import type { IdentityTables } from "../identity/tables.ts";
import type { JobTables } from "../jobs/tables.ts";
import type { MediaTables } from "../media/tables.ts";
import type { VideoTables } from "../video/tables.ts";
import type { UploadTables } from "../video/uploads/tables.ts";
import type { WebhookTables } from "../webhooks/tables.ts";

/** Every table of the store; each domain declares its own in `<domain>/tables.ts`. */
export interface Database
  extends IdentityTables,
    JobTables,
    CdnTables,
    WebhookTables,
    MediaTables,
    CloudTables,
    VideoTables,
    UploadTables {}
