import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

export const BIN = fileURLToPath(new URL("../../bin/cumulo.js", import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real `cumulo` binary with the given environment on top of this process's; `input`, when
 * given, is piped to its stdin (else stdin is empty, as with `< /dev/null`). A run that outlasts
 * `timeoutMs` is killed (its code is then null), so a hang fails its test and leaves no process behind.
 */
/**
 * The environment of a Cumulo process a test starts: the test's own, less the suite's own settings
 * (`CUMULO_TEST_STORE`, `CUMULO_TEST_CHROMIUM`), which a node would name as settings it does not read.
 */
export const testProcessEnv = (): Record<string, string | undefined> =>
  Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("CUMULO_TEST_")));

export function runCli(
  args: string[],
  env: Record<string, string | undefined>,
  input?: string,
  timeoutMs?: number,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...testProcessEnv(), CUMULO_LOG_LEVEL: "silent", ...env },
      stdio: ["pipe", "pipe", "pipe"],
      timeout: timeoutMs,
      killSignal: "SIGKILL",
    });
    child.stdin.end(input ?? "");
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
