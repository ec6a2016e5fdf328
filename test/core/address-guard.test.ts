import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { describe, expect, it } from "vitest";
import {
  assertTargetAllowed,
  checkUrlTarget,
  createGuardedAgent,
  isLocalhostName,
  isPublicAddress,
} from "../../src/net/address-guard.ts";

describe("address guard", () => {
  it("classifies addresses that reach inside the platform as not public", () => {
    for (const address of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "::1",
      "::",
      "fe80::1",
      "fc00::1",
      "::ffff:127.0.0.1",
      "::ffff:10.0.0.1",
      "224.0.0.1",
      "168.63.129.16",
      "::ffff:168.63.129.16",
      "not-an-ip",
    ]) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    for (const address of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      expect(isPublicAddress(address), address).toBe(true);
    }
  });

  it("refuses URLs naming or resolving to private addresses unless allowed", async () => {
    expect(await checkUrlTarget("http://127.0.0.1:8080/hook", false)).toMatchObject({ outcome: "blocked" });
    expect(await checkUrlTarget("http://[::1]/hook", false)).toMatchObject({ outcome: "blocked" });
    expect(await checkUrlTarget("http://localhost/hook", false)).toMatchObject({ outcome: "blocked" });
    expect(await checkUrlTarget("http://localhost/hook", true)).toEqual({ outcome: "public" });
    // Loopback by definition (RFC 6761), though this machine's resolver finds none of them: they
    // passed the check when saved (QA of 4 December, session 41).
    for (const host of ["foo.localhost", "foo.LocalHost.", "localhost.", "a.b.localhost"]) {
      expect(await checkUrlTarget(`http://${host}:9322/hook`, false), host).toMatchObject({
        outcome: "blocked",
      });
      expect(
        await checkUrlTarget(`http://${host}:9322/hook`, (address) => address === "127.0.0.1"),
        host,
      ).toEqual({
        outcome: "public",
      });
    }
    expect(isLocalhostName("localhost.example.com")).toBe(false);
    expect(await checkUrlTarget("http://8.8.8.8/hook", false)).toEqual({ outcome: "public" });
    // Only http(s) URLs with a host are targets at all, whatever private addresses are allowed.
    for (const text of ["not a url", "ftp://example.com/x", "javascript:alert(1)", "file:///etc/passwd"]) {
      expect(await checkUrlTarget(text, true), text).toEqual({ outcome: "not_http" });
    }
    expect(() => assertTargetAllowed(new URL("http://10.0.0.1/"), false)).toThrow(/not public|private/);
  });

  it("does not connect to a name that resolves to loopback, and does when private targets are allowed", async () => {
    const server = createServer((_req, res) => res.end("reached"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const guarded = createGuardedAgent({ allowPrivate: false, connectTimeoutMs: 2000 });
      await expect(request(`http://localhost:${port}/`, { dispatcher: guarded })).rejects.toThrow(
        /loopback|private/,
      );
      await expect(request(`http://app.localhost:${port}/`, { dispatcher: guarded })).rejects.toThrow(
        /loopback|private/,
      );
      const open = createGuardedAgent({ allowPrivate: true, connectTimeoutMs: 2000 });
      const response = await request(`http://localhost:${port}/`, { dispatcher: open });
      expect(await response.body.text()).toBe("reached");
      await Promise.all([guarded.close(), open.close()]);
    } finally {
      server.close();
    }
  });
});
