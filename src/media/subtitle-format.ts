/** Content checks of subtitle files: a file is WebVTT or SRT by what it holds, not by its name. */

import { parse as parseLanguageTag, stringify as stringifyLanguageTag } from "bcp-47";

export type SubtitleFormat = "vtt" | "srt";

const VTT_TIME = String.raw`(?:\d{2,}:)?[0-5]\d:[0-5]\d\.\d{3}`;
const VTT_TIMING = new RegExp(String.raw`^${VTT_TIME}[ \t]+-->[ \t]+${VTT_TIME}(?:[ \t]+.*)?$`);
const SRT_TIME = String.raw`\d{1,2}:[0-5]\d:[0-5]\d[,.]\d{1,3}`;
const SRT_TIMING = new RegExp(String.raw`^${SRT_TIME}[ \t]*-->[ \t]*${SRT_TIME}(?:[ \t]+.*)?$`);

function decode(content: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(content);
  } catch {
    return undefined;
  }
}

/**
 * The text's blocks (runs of non-empty lines; a block of blank lines alone is none), one at a time,
 * so that a check that fails early builds no further blocks: an SRT file was cut into blocks twice,
 * whole, first for the WebVTT check its first line fails (1.35 s of the event loop for 5 MiB).
 */
function* blocksOf(text: string): Generator<string[], void> {
  let block: string[] = [];
  let blank = true;
  for (const line of text.split(/\r\n?|\n/)) {
    if (line !== "") {
      block.push(line);
      blank &&= line.trim() === "";
    } else {
      if (!blank) yield block;
      block = [];
      blank = true;
    }
  }
  if (!blank) yield block;
}

/** WebVTT: the `WEBVTT` signature line, then cue, NOTE, STYLE and REGION blocks. */
function isWebVtt(text: string): boolean {
  const blocks = blocksOf(text);
  const header = blocks.next().value;
  if (!header || !/^WEBVTT(?:[ \t].*)?$/.test(header[0] ?? "")) return false;
  // Header lines after the signature may not contain a cue timing arrow.
  if (header.slice(1).some((line) => line.includes("-->"))) return false;
  for (const lines of blocks) {
    const first = lines[0] ?? "";
    if (/^(NOTE|STYLE|REGION)(?:[ \t]|$)/.test(first)) continue;
    const timing = VTT_TIMING.test(first) ? first : lines[1];
    if (timing === undefined || !VTT_TIMING.test(timing)) return false;
  }
  return true;
}

/** SRT: numbered cues, each an index line, a timing line and text; at least one cue. */
function isSrt(text: string): boolean {
  let cues = 0;
  for (const lines of blocksOf(text)) {
    if (!/^\d+$/.test((lines[0] ?? "").trim()) || !SRT_TIMING.test(lines[1] ?? "")) return false;
    cues++;
  }
  return cues > 0;
}

export function detectSubtitleFormat(content: Uint8Array): SubtitleFormat | undefined {
  const text = decode(content);
  if (text === undefined) return undefined;
  const body = text.replace(/^\uFEFF/, "");
  if (isWebVtt(body)) return "vtt";
  if (isSrt(body)) return "srt";
  return undefined;
}

/** The canonical form of a well-formed BCP 47 tag (`pt-br` -> `pt-BR`), else undefined. */
export function canonicalLanguage(tag: string): string | undefined {
  try {
    const [canonical] = Intl.getCanonicalLocales(tag);
    return canonical;
  } catch {
    // Well-formed BCP 47 that is no Unicode locale id: a grandfathered tag (`i-klingon`, read as its
    // preferred `tlh`) or a private-use one (`x-whatever`).
    const parsed = parseLanguageTag(tag);
    return parsed.language || parsed.privateuse.length > 0 ? stringifyLanguageTag(parsed) : undefined;
  }
}
