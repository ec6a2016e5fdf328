import { describe, expect, it } from "vitest";
import { srtToVtt, withTimestampMap } from "../../src/video/playlists.ts";

const MAP = "X-TIMESTAMP-MAP=MPEGTS:133200,LOCAL:00:00:00.000";

describe("subtitles served with an X-TIMESTAMP-MAP (RFC 8216, 3.5)", () => {
  it("puts the map in the header, after the WEBVTT line, keeping the rest as it was", () => {
    expect(withTimestampMap("WEBVTT\n\n00:00.000 --> 00:01.000\nHi\n", 133_200)).toBe(
      `WEBVTT\n${MAP}\n\n00:00.000 --> 00:01.000\nHi\n`,
    );
    expect(
      withTimestampMap(
        "WEBVTT - a title\nKind: captions\n\nSTYLE\n::cue {}\n\n1\n00:00.000 --> 00:01.000\nHi",
        133_200,
      ),
    ).toBe(`WEBVTT - a title\n${MAP}\nKind: captions\n\nSTYLE\n::cue {}\n\n1\n00:00.000 --> 00:01.000\nHi`);
    expect(withTimestampMap(srtToVtt("1\r\n00:00:00,500 --> 00:00:02,000\r\nHello\r\n"), 133_200)).toBe(
      `WEBVTT\n${MAP}\n\n1\n00:00:00.500 --> 00:00:02.000\nHello\n`,
    );
  });

  it("replaces a map the file had, reads every line ending, and keeps a blank line before a first cue", () => {
    expect(
      withTimestampMap(
        "WEBVTT\r\nX-TIMESTAMP-MAP=LOCAL:00:00:00.000,MPEGTS:900000\r\n\r\n00:00.000 --> 00:01.000\r\nHi",
        133_200,
      ),
    ).toBe(`WEBVTT\n${MAP}\n\n00:00.000 --> 00:01.000\nHi`);
    expect(withTimestampMap("WEBVTT\r\r00:00.000 --> 00:01.000\rHi\r", 133_200)).toBe(
      `WEBVTT\n${MAP}\n\n00:00.000 --> 00:01.000\nHi\n`,
    );
    // A cue right after the WEBVTT line, with no blank line: it stays a cue, not a header line.
    expect(withTimestampMap("WEBVTT\n00:00.000 --> 00:01.000\nHi\n", 133_200)).toBe(
      `WEBVTT\n${MAP}\n\n00:00.000 --> 00:01.000\nHi\n`,
    );
    expect(withTimestampMap("WEBVTT", 126_000)).toBe(
      "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:126000,LOCAL:00:00:00.000",
    );
  });
});

describe("SRT served as WebVTT", () => {
  it("ends a cue at a line of blanks, as SRT players do, where WebVTT needs an empty line", () => {
    expect(
      srtToVtt("1\n00:00:00,000 --> 00:00:01,000\nfirst\n \n2\n00:00:01,000 --> 00:00:02,000\nsecond\n\t\n"),
    ).toBe("WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\nfirst\n\n2\n00:00:01.000 --> 00:00:02.000\nsecond\n");
  });

  it("escapes a < that starts no whole tag, however it goes on", () => {
    expect(
      srtToVtt("1\n00:00:00,000 --> 00:00:01,000\nif x<y then z\na<b and c </3 <i>ok</i> <c.yellow>y</c>\n"),
    ).toBe(
      "WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\nif x&lt;y then z\na&lt;b and c &lt;/3 <i>ok</i> <c.yellow>y</c>\n",
    );
  });

  it("escapes text WebVTT would read as markup or a timing line, keeping SRT's tags and entities", () => {
    expect(
      srtToVtt(
        '1\n00:00:00,000 --> 00:00:01,000\n5 < 6 & 7 > 3\nTom & Jerry <3 &amp; &#233;\nA --> B <i>it</i> <font color="red">x</font>\n',
      ),
    ).toBe(
      'WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\n5 &lt; 6 &amp; 7 > 3\nTom &amp; Jerry &lt;3 &amp; &#233;\nA --&gt; B <i>it</i> <font color="red">x</font>\n',
    );
  });
});
