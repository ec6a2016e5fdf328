import { useEffect, useState } from "react";
import { api } from "../api.ts";

/** How often the frame asks again; the answer is cheap and a stale badge misleads. */
const REFRESH_MS = 30_000;

type Health = "checking" | "healthy" | "unhealthy" | "unknown";

/**
 * The frame's livestream health badge. `getLivestreamHealth` answers `{status}` (503 with
 * `unhealthy`); an answer without a status (network failure, 5xx page) is shown as unknown rather
 * than as a verdict on the livestream service.
 */
async function askHealth(): Promise<Health> {
  try {
    const { data, error } = await api.GET("/v1/livestream/health");
    const status = (data ?? (error as { status?: unknown } | undefined))?.status;
    return status === "healthy" || status === "unhealthy" ? status : "unknown";
  } catch {
    return "unknown";
  }
}

export function LivestreamHealth() {
  const [health, setHealth] = useState<Health>("checking");
  const [checkedAt, setCheckedAt] = useState<Date>();
  useEffect(() => {
    let stopped = false;
    const check = async () => {
      const status = await askHealth();
      if (stopped) return;
      setHealth(status);
      setCheckedAt(new Date());
    };
    void check();
    const timer = setInterval(check, REFRESH_MS);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, []);
  return (
    <output
      className={`health health-${health}`}
      data-livestream-health={health}
      title={checkedAt ? `Checked at ${checkedAt.toLocaleTimeString()}` : undefined}
    >
      <span className="dot" aria-hidden="true" />
      Livestream: {health}
    </output>
  );
}
