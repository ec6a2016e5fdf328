/** HLS text the edge writes on the fly: subtitle tracks in the master, tokens carried into URIs. */

export interface SubtitleTrack {
  id: string;
  title: string;
  language: string;
}

const SUBTITLE_GROUP = "subs";

/** Text for a quoted HLS attribute, which can hold neither quotes nor line breaks. */
export const attributeText = (value: string): string => value.replace(/["\r\n]/g, "'");

/** Adds one `EXT-X-MEDIA TYPE=SUBTITLES` per track and points every variant at the group. */
export function withSubtitleTracks(master: string, tracks: SubtitleTrack[]): string {
  if (tracks.length === 0) return master;
  const lines = master.trimEnd().split("\n");
  const at = lines.findIndex((line) => line.startsWith("#EXT-X-STREAM-INF"));
  const media = tracks.map(
    (track, index) =>
      `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="${SUBTITLE_GROUP}",NAME="${attributeText(track.title)}",LANGUAGE="${attributeText(track.language)}",DEFAULT=${index === 0 ? "YES" : "NO"},AUTOSELECT=YES,FORCED=NO,URI="subtitles/${track.id}.m3u8"`,
  );
  const out = lines.map((line) =>
    line.startsWith("#EXT-X-STREAM-INF:") ? `${line},SUBTITLES="${SUBTITLE_GROUP}"` : line,
  );
  out.splice(at === -1 ? out.length : at, 0, ...media);
  return `${out.join("\n")}\n`;
}

/** A one-cue-file subtitle media playlist covering the whole video. */
export function subtitlePlaylist(subtitleId: string, durationS: number): string {
  const duration = Math.max(durationS, 0.001);
  return `${[
    "#EXTM3U",
    "#EXT-X-VERSION:3",
    `#EXT-X-TARGETDURATION:${Math.ceil(duration)}`,
    "#EXT-X-MEDIA-SEQUENCE:0",
    "#EXT-X-PLAYLIST-TYPE:VOD",
    `#EXTINF:${duration.toFixed(3)},`,
    `${subtitleId}.vtt`,
    "#EXT-X-ENDLIST",
  ].join("\n")}\n`;
}

/** Appends `query` (`token=...&expires=...`) to every URI a playlist lists, lines and `URI="..."` alike. */
export function withQuery(playlist: string, query: string): string {
  const add = (uri: string) => `${uri}${uri.includes("?") ? "&" : "?"}${query}`;
  return playlist
    .split("\n")
    .map((line) => {
      if (line === "") return line;
      if (line.startsWith("#"))
        return line.replace(/URI="([^"]*)"/g, (_match, uri: string) => `URI="${add(uri)}"`);
      return add(line);
    })
    .join("\n");
}

const SRT_TIME = /(\d{1,2}):(\d{2}):(\d{2})[,.](\d{1,3})/g;

/**
 * Where the segments of a video start when its own start was not kept (videos processed before
 * 6 December): ffmpeg's MPEG-TS muxer begins at 1.4 s, before the B-frames' few hundredths.
 */
export const MUXER_START_PTS = 126_000;

/**
 * The WebVTT with `X-TIMESTAMP-MAP` (RFC 8216, 3.5) placing its cue time 0 at `startPts`, the
 * segments' first frame: without it HLS players (hls.js, Safari) take cue time 0 as MPEG-TS time 0
 * and showed every cue 1.4-1.5 s early. A map the file had (made for other segments) is replaced.
 * Outside HLS the line is one of the header's, which WebVTT readers skip.
 */
export function withTimestampMap(vtt: string, startPts: number): string {
  const lines = vtt.split(/\r\n?|\n/);
  // The header runs from the `WEBVTT` line to a blank line, or to a cue a sloppy file starts at once.
  let end = 1;
  while (end < lines.length && lines[end] !== "" && !lines[end]?.includes("-->")) end++;
  const header = lines.slice(1, end).filter((line) => !line.startsWith("X-TIMESTAMP-MAP="));
  const rest = lines.slice(end);
  return [
    lines[0],
    `X-TIMESTAMP-MAP=MPEGTS:${startPts},LOCAL:00:00:00.000`,
    ...header,
    ...(rest[0]?.includes("-->") ? [""] : []),
    ...rest,
  ].join("\n");
}

/** An SRT timing line: its start time, then the arrow. */
const SRT_TIMING = /^\s*\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->/;

/** A whole tag SRT writes or WebVTT reads (`<i>`, `</b>`, `<font color="red">`, `<c.yellow>`, `<v Ann>`). */
const CUE_TAG = /^<\/?(?:b|i|u|s|font|c|v|lang|ruby|rt)(?:[\s.][^<>]*)?>/i;

/**
 * Cue text as WebVTT reads it: `&` and `<` start entities and tags there, and `-->` a timing line.
 * Whole tags and entities are kept; any other `<` or `&` is escaped (`if x<y then z` lost its end).
 */
const vttCueText = (line: string): string =>
  line
    .replace(/&(?!(?:[A-Za-z]+|#\d+|#[xX][\da-fA-F]+);)/g, "&amp;")
    .replace(/</g, (_less, at: number, text: string) => (CUE_TAG.test(text.slice(at)) ? "<" : "&lt;"))
    .replaceAll("-->", "--&gt;");

/**
 * WebVTT of an SRT file: header, `.` as decimal mark, zero-padded times, cue numbers kept as ids;
 * lines of blanks end a cue as an empty line does (SRT players read them so, WebVTT would not), and
 * text is escaped where WebVTT would read markup (QA of 6 December: text was lost, cues ran together).
 */
export function srtToVtt(srt: string): string {
  const body = srt
    .replace(/^\uFEFF/, "")
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((line) => {
      if (line.trim() === "") return "";
      if (!SRT_TIMING.test(line)) return vttCueText(line);
      return line.replace(
        SRT_TIME,
        (_match, h: string, m: string, s: string, ms: string) =>
          `${h.padStart(2, "0")}:${m}:${s}.${ms.padEnd(3, "0")}`,
      );
    })
    .join("\n");
  return `WEBVTT\n\n${body.trim()}\n`;
}
