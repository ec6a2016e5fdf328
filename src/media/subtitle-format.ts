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

const blocksOf = (text: string): string[][] =>
  text
    .replace(/\r\n?/g, "\n")
    .split(/\n{2,}/)
    .map((block) => block.split("\n").filter((line) => line !== ""))
    .filter((lines) => lines.length > 0 && lines.some((line) => line.trim() !== ""));

/** WebVTT: the `WEBVTT` signature line, then cue, NOTE, STYLE and REGION blocks. */
function isWebVtt(text: string): boolean {
  const [header, ...blocks] = blocksOf(text);
  if (!header || !/^WEBVTT(?:[ \t].*)?$/.test(header[0] ?? "")) return false;
  // Header lines after the signature may not contain a cue timing arrow.
  if (header.slice(1).some((line) => line.includes("-->"))) return false;
  return blocks.every((lines) => {
    const first = lines[0] ?? "";
    if (/^(NOTE|STYLE|REGION)(?:[ \t]|$)/.test(first)) return true;
    const timing = VTT_TIMING.test(first) ? first : lines[1];
    return timing !== undefined && VTT_TIMING.test(timing);
  });
}

/** SRT: numbered cues, each an index line, a timing line and text; at least one cue. */
function isSrt(text: string): boolean {
  const blocks = blocksOf(text);
  if (blocks.length === 0) return false;
  return blocks.every((lines) => /^\d+$/.test((lines[0] ?? "").trim()) && SRT_TIMING.test(lines[1] ?? ""));
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
