import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

export function KeysPage() {
  return (
    <>
      <PageHeader title="API keys" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
