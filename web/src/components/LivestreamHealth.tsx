import { api } from "../api.ts";
import { useLoad } from "../load.ts";

/** The frame's livestream health badge: healthy, unhealthy, or unknown while it is asked. */
export function LivestreamHealth() {
  const health = useLoad(async () => {
    const { response } = await api.GET("/v1/livestream/health");
    return response.ok ? "healthy" : "unhealthy";
  }, "health");
  const status = health.state === "ready" ? health.data : health.state === "error" ? "unhealthy" : "checking";
  return (
    <output className={`health health-${status}`} aria-live="polite" data-livestream-health={status}>
      <span className="dot" aria-hidden="true" />
      Livestream: {status}
    </output>
  );
}
