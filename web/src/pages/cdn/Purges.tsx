import type { paths } from "@cumulo/client";
import { useRef, useState } from "react";
import { api, call, errorsOfLines } from "../../api.ts";
import { type Column, DataTable, pagingOf } from "../../components/DataTable.tsx";
import { DateTime } from "../../components/DateTime.tsx";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { useRevealWhenOpened } from "../../components/reveal.ts";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { WrapPoints } from "../../components/WrapPoints.tsx";
import { itemsByLine, submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import type { Distribution } from "./Distributions.tsx";

type PurgeList =
  paths["/v1/cdn/distributions/{distributionID}/purges"]["get"]["responses"][200]["content"]["application/json"];
type Purge = PurgeList["data"][number];

const columns: Column<Purge>[] = [
  { header: "When", cell: (purge) => <DateTime value={purge.created_at} />, rowHeader: true },
  {
    header: "Paths",
    cell: (purge) => (
      <ul className="plain-list">
        {purge.paths.map((path) => (
          <li key={path} className="mono break">
            <WrapPoints text={path} />
          </li>
        ))}
      </ul>
    ),
  },
];

/** The purge form of one distribution (one path or pattern a line) and its purge history. */
export function Purges({ distribution, opened }: { distribution: Distribution; opened: number }) {
  const { readOnly } = useSignedIn();
  const heading = useRevealWhenOpened<HTMLHeadingElement>(opened);
  const [page, setPage] = useState(1);
  const [paths, setPaths] = useState("");
  const [done, setDone] = useState<string>();
  const history = useLoad(
    () =>
      call(
        api.GET("/v1/cdn/distributions/{distributionID}/purges", {
          params: { path: { distributionID: distribution.id }, query: { page, limit: 20 } },
        }),
      ),
    `${page}`,
  );
  // The line of the textarea each path sent came from (blank lines are not sent).
  const sentFromLines = useRef<number[]>([]);
  const { submit, busy, errors, formError } = useSubmit(async () => {
    setDone(undefined);
    const sent = itemsByLine(paths);
    sentFromLines.current = sent.map(({ line }) => line);
    const list = sent.map(({ item }) => item);
    await call(
      api.POST("/v1/cdn/distributions/{distributionID}/purges", {
        params: { path: { distributionID: distribution.id } },
        body: { paths: list },
      }),
    );
    setDone(`Purged ${list.length} ${list.length === 1 ? "path" : "paths"}.`);
    setPaths("");
    history.reload();
  });
  // The API names a bad path `paths.N`: shown beside the textarea with the line it was typed on.
  const pathError = errorsOfLines(errors, "paths", (index) => sentFromLines.current[index] ?? index + 1);

  return (
    <section className="panel" aria-labelledby="cdn-purges-title">
      <h2 id="cdn-purges-title" tabIndex={-1} ref={heading}>
        Purges of <WrapPoints text={distribution.hostname} />
      </h2>
      <form noValidate onSubmit={submitting(submit)}>
        <WriteFields>
          <Field
            label="Paths to purge"
            name="paths"
            error={pathError}
            hint="One path per line: /img/logo.png, a prefix such as /img/*, or /* for everything."
          >
            {(control) => (
              <textarea
                {...control}
                rows={3}
                value={paths}
                onChange={(event) => setPaths(event.target.value)}
              />
            )}
          </Field>
        </WriteFields>
        <OtherErrors
          errors={errors}
          shown={["paths", ...Object.keys(errors).filter((field) => field.startsWith("paths."))]}
        />
        <FormError message={formError} />
        {done && (
          <p className="notice" role="status">
            {done}
          </p>
        )}
        <button type="submit" className="primary" disabled={readOnly || busy}>
          Purge
        </button>
      </form>
      <h3>History</h3>
      {history.state === "loading" && <Loading what="Loading purges" />}
      {history.state === "error" && <ErrorState error={history.error} onRetry={history.reload} />}
      {history.state === "ready" &&
        (history.data.data.length === 0 ? (
          <Empty>
            <p>Nothing purged yet.</p>
          </Empty>
        ) : (
          <DataTable
            caption={`Purges of ${distribution.hostname}`}
            columns={columns}
            rows={history.data.data}
            rowKey={(purge) => purge.id}
            paging={pagingOf(history.data.meta, setPage)}
          />
        ))}
    </section>
  );
}
