import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

/** Placeholder: the Webhooks page is built by a later change (issue 12). */
export function WebhooksPage() {
  return (
    <>
      <PageHeader title="Webhooks" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
