import { type ChildProcess, spawn } from "node:child_process";
import { BIN, testProcessEnv } from "./cli.ts";

export interface Served {
  child: ChildProcess;
  output: () => string;
  /** Where the API listens; empty when the process runs no `api` role. */
  apiUrl: string;
  /** Where the CDN edge listens, when the process runs the `edge` role on a port. */
  edgeUrl: string | undefined;
  /** The metrics listener's base URL, when the process has one (`CUMULO_METRICS_PORT`). */
  metricsUrl: string | undefined;
}

/**
 * Starts `cumulo serve` (or `args`) as a real process and waits until it says it is ready and where it
 * listens. `launcher`: a command that runs it (`["prlimit", "--nofile=1024:1024"]`).
 */
export function serve(
  env: Record<string, string | undefined>,
  args = ["serve"],
  startupLimitMs = 90_000,
  launcher: string[] = [],
): Promise<Served> {
  const [command, ...commandArgs] = [...launcher, process.execPath, BIN, ...args] as [string, ...string[]];
  const child = spawn(command, commandArgs, {
    // A short shutdown grace, as in startTestApp: idle connections of the test's fetch would hold
    // every stop for the whole default second; tests of the grace itself set their own.
    env: {
      ...testProcessEnv(),
      PORT: "0",
      CUMULO_EDGE_PORT: "off",
      CUMULO_LOG_LEVEL: "warn",
      CUMULO_SHUTDOWN_GRACE_MS: "50",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  return new Promise((resolve, reject) => {
    // A bound, not a measure: a start that compiles the sources with tsx on a loaded machine took over 20 s.
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), startupLimitMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (!/^Cumulo ready/m.test(output)) return;
      clearTimeout(timer);
      resolve({
        child,
        output: () => output,
        apiUrl: /API listening on (http:\/\/\S+)/.exec(output)?.[1] ?? "",
        edgeUrl: /edge listening on (http:\/\/\S+)/.exec(output)?.[1],
        metricsUrl: /metrics listening on (http:\/\/\S+)\/metrics/.exec(output)?.[1],
      });
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("exit", (code) => reject(new Error(`server exited with ${code}:\n${output}`)));
  });
}

export const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    // A process killed by a signal has no exit code but a signal code; either means it has exited.
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.on("exit", (code) => resolve(code));
  });

/** Sends SIGTERM to every served process and waits until all have exited. */
export const stopAll = (nodes: Served[]) =>
  Promise.all(
    nodes.map((node) => {
      node.child.kill("SIGTERM");
      return exitOf(node.child);
    }),
  );
