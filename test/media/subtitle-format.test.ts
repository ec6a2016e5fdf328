import { describe, expect, it } from "vitest";
import { detectSubtitleFormat } from "../../src/media/subtitle-format.ts";

const detect = (text: string) => detectSubtitleFormat(new TextEncoder().encode(text));

describe("subtitle format by content", () => {
  it("takes WebVTT with its header lines, cue identifiers and NOTE, STYLE and REGION blocks", () => {
    expect(detect("WEBVTT\n\n00:00.000 --> 00:01.500\nHello\n")).toBe("vtt");
    expect(
      detect(
        "\uFEFFWEBVTT - a title\nKind: captions\n\n\n\nintro\n00:00:00.000 --> 00:00:01.000 align:start\nHi\n",
      ),
    ).toBe("vtt");
    expect(
      detect("WEBVTT\r\n\r\nNOTE a remark\r\n\r\nSTYLE\r\n::cue { color: red }\r\n\r\nREGION\r\nid:r\r\n"),
    ).toBe("vtt");
    expect(detect("WEBVTT\n")).toBe("vtt");
    // the first non-blank block is the header, as before the blocks were read one at a time
    expect(detect("\nWEBVTT\n\n00:00.000 --> 00:01.000\nx\n")).toBe("vtt");
  });

  it("refuses WebVTT with an arrow in its header, a cue without timing or no signature", () => {
    expect(detect("WEBVTT\n00:00.000 --> 00:01.000\nHi\n")).toBeUndefined();
    expect(detect("WEBVTT\n\nHello without timing\n")).toBeUndefined();
    expect(detect("WEBVTTX\n\n00:00.000 --> 00:01.000\nHi\n")).toBeUndefined();
    expect(
      detect("WEBVTT\n\n00:00.000 --> 00:01.000\nHi\n\n00:61.000 --> 00:62.000\nlate\n"),
    ).toBeUndefined();
  });

  it("takes SRT with any line ends and blank lines around its cues, and at least one cue", () => {
    expect(detect("1\r\n00:00:01,000 --> 00:00:02,000\r\nHi\r\n")).toBe("srt");
    expect(detect("1\r00:00:01,000 --> 00:00:02,000\rHi\r\r2\r00:00:03.5 --> 00:00:04,000\rYo\r")).toBe(
      "srt",
    );
    expect(
      detect("\n\n \n\n1\n00:00:01,000 --> 00:00:02,000\nHi\n\n\n\n2\n0:00:03,000-->0:00:04,000\n\n  \n"),
    ).toBe("srt");
    expect(detect("")).toBeUndefined();
    expect(detect("\n \n\t\n")).toBeUndefined();
  });

  it("refuses SRT whose every cue is not an index and a timing line, and text that is not UTF-8", () => {
    const cue = (index: string, timing: string) => `${index}\n${timing}\nHi\n\n`;
    const good = cue("1", "00:00:01,000 --> 00:00:02,000");
    expect(detect(good.repeat(50) + cue("x", "00:00:01,000 --> 00:00:02,000"))).toBeUndefined();
    expect(detect(good.repeat(50) + cue("51", "00:00:01 --> 00:00:02"))).toBeUndefined();
    expect(detect(`${good}Hello\n`)).toBeUndefined();
    expect(detectSubtitleFormat(new Uint8Array([0x31, 0x0a, 0xff, 0xfe]))).toBeUndefined();
  });

  it("reads a subtitle file of the 5 MiB limit", () => {
    let srt = "";
    for (let i = 1; srt.length < 5 * 1024 * 1024; i++)
      srt += `${i}\n00:00:01,000 --> 00:00:02,000\nLine ${i}\n\n`;
    expect(detect(srt)).toBe("srt");
    expect(detect(`${srt}oops\n`)).toBeUndefined();
  });
});
