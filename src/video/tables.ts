import type { Insertable, Selectable, Updateable } from "kysely";
import type { Bool, Timestamp } from "../store/types.ts";

/**
 * The processing state of a video's current source. `generation` grows with every upload: renditions
 * live under `media/{library}/{video}/renditions/{generation}/`, and a job for an older generation
 * stops without touching the video.
 */
export interface VideoProcessingTable {
  video_id: string;
  organization_id: string;
  library_id: string;
  generation: number;
  source_key: string;
  source_bytes: number;
  /** Probed duration in seconds (fractional), 0 until probed. */
  duration_s: number;
  has_audio: Bool;
  thumbnail_count: number;
  /**
   * The first video frame's timestamp in the HLS segments, in MPEG-TS ticks (90 kHz): subtitles are
   * served mapped to it. Null until packaged, and for videos processed before it was kept.
   */
  timeline_start_pts: number | null;
  /** Why processing failed (status `failed`), else null. */
  failure_reason: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface VideoTables {
  video_processing: VideoProcessingTable;
}

export type ProcessingRow = Selectable<VideoProcessingTable>;
export type NewProcessingRow = Insertable<VideoProcessingTable>;
export type ProcessingChanges = Updateable<VideoProcessingTable>;
