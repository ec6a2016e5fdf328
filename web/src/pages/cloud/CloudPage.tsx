import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

/** Placeholder: the Cloud page is built by a later change (issue 12). */
export function CloudPage() {
  return (
    <>
      <PageHeader title="Cloud" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
