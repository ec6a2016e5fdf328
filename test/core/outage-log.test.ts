import { expect, it } from "vitest";
import { OutageLog } from "../../src/store/unavailable.ts";
import { capturingLogger } from "../fuzz/log-capture.ts";

it("logs an outage once when it begins and once when it ends, and a fault each time under its own name", () => {
  const { logger, lines } = capturingLogger("info");
  const log = new OutageLog(
    logger,
    { outage: "claim failed: store unavailable", back: "claim works again", fault: "claim failed" },
    (error) => error instanceof Error && error.message === "away",
  );
  log.succeeded();
  for (let i = 0; i < 3; i++) log.failed(new Error("away"));
  log.failed(new Error("a bug"));
  log.succeeded();
  log.succeeded();
  expect(lines.map((line) => [line.level, line.msg])).toEqual([
    [40, "claim failed: store unavailable"],
    [50, "claim failed"],
    [30, "claim works again"],
  ]);
  expect(lines[2]).toMatchObject({ failedTries: 3 });
});
