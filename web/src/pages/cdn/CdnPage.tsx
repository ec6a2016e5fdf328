import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

/** Placeholder: the CDN page is built by a later change (issue 12). */
export function CdnPage() {
  return (
    <>
      <PageHeader title="CDN" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
