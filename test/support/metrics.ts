import { expect } from "vitest";
import type { TestApp } from "./app.ts";

/** The samples of an exposition, by series (`name{label="value",...}` exactly as written). */
export function parseSamples(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** The value of one series; labels in the order prom-client writes them (as declared). */
export function sampleValue(
  samples: Map<string, number>,
  name: string,
  labels: Record<string, string> = {},
): number {
  const list = Object.entries(labels)
    .map(([label, text]) => `${label}="${text}"`)
    .join(",");
  return samples.get(list === "" ? name : `${name}{${list}}`) ?? 0;
}

/** `GET /metrics` on the API port with the metrics token the app was started with. */
export async function scrapeMetrics(
  t: TestApp,
  token: string,
): Promise<{ text: string; samples: Map<string, number> }> {
  const response = await t.request("GET", "/metrics", { headers: { authorization: `Bearer ${token}` } });
  expect(response.status).toBe(200);
  return { text: response.text, samples: parseSamples(response.text) };
}
