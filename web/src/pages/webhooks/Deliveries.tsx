import type { paths } from "@cumulo/client";
import { useState } from "react";
import { api, call, messageOf } from "../../api.ts";
import { pagingOf } from "../../components/DataTable.tsx";
import { DateTime } from "../../components/DateTime.tsx";
import { useRevealWhenOpened } from "../../components/reveal.ts";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { useOneAtATime } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import { eventsInWords } from "./EndpointDialog.tsx";
import type { Endpoint } from "./WebhooksPage.tsx";

type DeliveryList =
  paths["/v1/media/libraries/{libraryId}/webhooks/{endpointId}/events"]["get"]["responses"][200]["content"]["application/json"];
type Delivery = DeliveryList["data"][number];

/** Pretty-prints JSON text, and leaves any other text as it came. */
function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/**
 * The endpoint's delivery log (one record per attempt made, newest first), each with its payload,
 * the receiver's answer or the error, and a button that sends the notification once more.
 */
interface DeliveriesProps {
  libraryId: string;
  endpoint: Endpoint;
  /** Grows each time the person opens this log: it is then brought into view. */
  opened: number;
}

export function Deliveries({ libraryId, endpoint, opened }: DeliveriesProps) {
  const { readOnly } = useSignedIn();
  const heading = useRevealWhenOpened<HTMLHeadingElement>(opened);
  const [page, setPage] = useState(1);
  const [notice, setNotice] = useState<Notice>();
  const deliveries = useLoad(
    () =>
      call(
        api.GET("/v1/media/libraries/{libraryId}/webhooks/{endpointId}/events", {
          params: { path: { libraryId, endpointId: endpoint.id }, query: { page, limit: 20 } },
        }),
      ),
    `${page}`,
  );

  // One at a time: a double-click sent the receiver two test events.
  // A redelivery's outcome is shown by its own button (`deliveryId`), far down a long log.
  const acting = useOneAtATime(
    async (label: string, action: () => Promise<{ data: { attempt: number } }>, deliveryId?: string) => {
      setNotice(undefined);
      try {
        const queued = await action();
        setNotice({
          text: `${label}: attempt ${queued.data.attempt} queued. Refresh to see it.`,
          error: false,
          deliveryId,
        });
      } catch (error) {
        setNotice({ text: `${label} failed: ${messageOf(error)}`, error: true, deliveryId });
      }
    },
  );
  const act = acting.run;

  const sendTest = () =>
    act("Test event", () =>
      call(
        api.POST("/v1/media/libraries/{libraryId}/webhooks/{endpointId}/test", {
          params: { path: { libraryId, endpointId: endpoint.id } },
        }),
      ),
    );
  const redeliver = (delivery: Delivery) =>
    act(
      "Redelivery",
      () =>
        call(
          api.POST("/v1/media/libraries/{libraryId}/webhooks/{endpointId}/events/{deliveryId}/retry", {
            params: { path: { libraryId, endpointId: endpoint.id, deliveryId: delivery.id } },
          }),
        ),
      delivery.id,
    );

  return (
    <section className="panel" aria-labelledby="webhook-deliveries-title">
      <div className="page-header">
        <h2 id="webhook-deliveries-title" tabIndex={-1} ref={heading}>
          Deliveries of {endpoint.name}
        </h2>
        <div className="page-actions">
          <button
            type="button"
            onClick={() => {
              // The queued attempt is in the refreshed list (or its answer is pending): the note is done.
              setNotice(undefined);
              deliveries.reload();
            }}
          >
            Refresh
          </button>
          <button type="button" disabled={readOnly} aria-busy={acting.busy} onClick={() => void sendTest()}>
            Send test event
          </button>
        </div>
      </div>
      {notice && notice.deliveryId === undefined && <NoticeText notice={notice} />}
      {deliveries.state === "loading" && <Loading what="Loading deliveries" />}
      {deliveries.state === "error" && <ErrorState error={deliveries.error} onRetry={deliveries.reload} />}
      {deliveries.state === "ready" &&
        (deliveries.data.data.length === 0 ? (
          <Empty>
            <p>
              No delivery yet. Events of this library's videos appear here once sent
              {/* A read-only user is not asked to use a button they cannot. */}
              {readOnly ? "." : '; try "Send test event".'}
            </p>
          </Empty>
        ) : (
          <>
            <ol className="delivery-list" aria-label="Delivery attempts, newest first">
              {deliveries.data.data.map((delivery) => (
                <DeliveryItem
                  key={delivery.id}
                  delivery={delivery}
                  readOnly={readOnly}
                  notice={notice?.deliveryId === delivery.id ? notice : undefined}
                  onRedeliver={() => void redeliver(delivery)}
                />
              ))}
            </ol>
            <Pager meta={deliveries.data.meta} onPage={setPage} />
          </>
        ))}
    </section>
  );
}

function Pager({ meta, onPage }: { meta: DeliveryList["meta"]; onPage: (page: number) => void }) {
  const paging = pagingOf(meta, onPage);
  if (paging.totalPages <= 1) return null;
  return (
    <nav className="pager" aria-label="Delivery pages">
      <button type="button" disabled={paging.page <= 1} onClick={() => onPage(paging.page - 1)}>
        Newer
      </button>
      <span>
        Page {paging.page} of {paging.totalPages}
      </span>
      <button
        type="button"
        disabled={paging.page >= paging.totalPages}
        onClick={() => onPage(paging.page + 1)}
      >
        Older
      </button>
    </nav>
  );
}

interface Notice {
  text: string;
  error: boolean;
  /** The attempt whose Redeliver this answers; none for the log's own buttons. */
  deliveryId?: string;
}

function NoticeText({ notice }: { notice: Notice }) {
  return (
    <p className={notice.error ? "field-error" : "notice"} role={notice.error ? "alert" : "status"}>
      {notice.text}
    </p>
  );
}

interface DeliveryItemProps {
  delivery: Delivery;
  readOnly: boolean;
  notice?: Notice;
  onRedeliver: () => void;
}

function DeliveryItem({ delivery, readOnly, notice, onRedeliver }: DeliveryItemProps) {
  // "not delivered" rather than "failed": beside a "failed" event, "failed failed" said nothing.
  const outcome = delivery.success ? "delivered" : "not delivered";
  const event = delivery.event === "test" ? "Test" : eventsInWords([delivery.event]);
  return (
    <li className="delivery" data-delivery-event={delivery.event}>
      <details>
        <summary>
          <span className={`status status-${delivery.success ? "ready" : "failed"}`}>{outcome}</span>{" "}
          <strong>{event} event</strong> · attempt {delivery.attempt} ·{" "}
          {delivery.response_status === 0 ? "no answer" : `HTTP ${delivery.response_status}`} ·{" "}
          {delivery.duration_ms} ms · <DateTime value={delivery.created_at} />
        </summary>
        <dl className="delivery-facts">
          <dt>Delivery</dt>
          <dd className="mono">{delivery.id}</dd>
          {delivery.video_id && (
            <>
              <dt>Video</dt>
              <dd className="mono">{delivery.video_id}</dd>
            </>
          )}
          {delivery.next_retry_at && (
            <>
              <dt>Next retry</dt>
              <dd>
                <DateTime value={delivery.next_retry_at} />
              </dd>
            </>
          )}
          {delivery.error && (
            <>
              <dt>Error</dt>
              <dd className="field-error">{delivery.error}</dd>
            </>
          )}
        </dl>
        <h3>Payload</h3>
        <pre className="code-block">{JSON.stringify(delivery.payload, null, 2)}</pre>
        <h3>Response</h3>
        <pre className="code-block">
          {delivery.response_body ? pretty(delivery.response_body) : "(empty)"}
        </pre>
        <button type="button" disabled={readOnly} onClick={onRedeliver}>
          Redeliver
        </button>
        {notice && <NoticeText notice={notice} />}
      </details>
    </li>
  );
}
