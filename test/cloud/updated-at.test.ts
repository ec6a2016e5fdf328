import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestClock } from "../cdn/support.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

// docs/cloud.md: `updated_at` moves when a resource's own record changes. An empty PATCH, or one
// repeating the stored values, moved it on every resource (QA of 4 December).
describe("cloud updated_at on a change that changes nothing", () => {
  let t: TestApp;
  const clock = new TestClock(new Date("2026-06-01T10:00:00.000Z"));
  beforeAll(async () => {
    t = await startTestApp({}, { clock });
  });
  afterAll(() => t.close());

  it("stays on every resource, and moves once something changes", async () => {
    const vm = (await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "web", description: "d" } }))
      .body;
    const disk = (
      await t.cloud("POST", "/v1/storage/disks", { form: { size_gb: "2", display_name: "data" } })
    ).body;
    const ip = (await t.cloud("POST", "/v1/network/ip_addresses", { json: { name: "front" } })).body;
    const balancer = (await t.cloud("POST", "/v1/network/load_balancers", { json: { display_name: "lb" } }))
      .body;
    const token = (await t.cloud("POST", "/v1/user-resource/token", { form: { description: "ci" } })).body[0];
    const resources: {
      read: () => Promise<{ body: { updated_at: string } }>;
      patch: (form: Record<string, string>) => Promise<{ status: number; body: any }>;
      same: Record<string, string>;
      changed: Record<string, string>;
      /** Its PATCH takes one field, which is required. */
      requiresField?: true;
    }[] = [
      {
        read: () => t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`),
        patch: (form: Record<string, string>) =>
          t.cloud("PATCH", "/v1/user-resource/vm", { form: { uuid: vm.uuid, ...form } }),
        same: { name: "web", description: "d" },
        changed: { description: "e" },
      },
      {
        read: () => t.cloud("GET", `/v1/storage/disks/${disk.uuid}`),
        patch: (form: Record<string, string>) => t.cloud("PATCH", `/v1/storage/disks/${disk.uuid}`, { form }),
        same: { display_name: "data", size_gb: "2" },
        changed: { display_name: "logs" },
      },
      {
        read: () => t.cloud("GET", `/v1/network/ip_addresses/${ip.address}`),
        patch: (form: Record<string, string>) =>
          t.cloud("PATCH", `/v1/network/ip_addresses/${ip.address}`, { form }),
        same: { name: "front" },
        changed: { name: "back" },
      },
      {
        read: () => t.cloud("GET", `/v1/network/load_balancers/${balancer.uuid}`),
        patch: (form: Record<string, string>) =>
          t.cloud("PATCH", `/v1/network/load_balancers/${balancer.uuid}`, { form }),
        same: { display_name: "lb" },
        changed: { display_name: "lb2" },
        requiresField: true,
      },
      {
        read: async () => {
          const list = await t.cloud("GET", "/v1/user-resource/token/list");
          return { ...list, body: list.body.find((row: { id: number }) => row.id === token.id) };
        },
        patch: (form: Record<string, string>) =>
          t.cloud("PATCH", "/v1/user-resource/token", { form: { token_id: String(token.id), ...form } }),
        same: { description: "ci", restricted: "false" },
        changed: { restricted: "true" },
      },
    ];
    for (const [index, resource] of resources.entries()) {
      const before = (await resource.read()).body.updated_at;
      expect(before, `${index}`).toEqual(expect.any(String));
      clock.advance(60_000);
      for (const form of resource.requiresField ? [resource.same] : [{}, resource.same]) {
        const answer = await resource.patch(form);
        expect([answer.status, answer.body.updated_at ?? answer.body[0]?.updated_at], `${index}`).toEqual([
          200,
          expect.any(String),
        ]);
        expect((await resource.read()).body.updated_at, `${index} ${JSON.stringify(form)}`).toBe(before);
      }
      expect((await resource.patch(resource.changed)).status).toBe(200);
      expect((await resource.read()).body.updated_at, `${index} changed`).not.toBe(before);
    }
  });
});
