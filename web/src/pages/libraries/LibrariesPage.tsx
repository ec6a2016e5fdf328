import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

export function LibrariesPage() {
  return (
    <>
      <PageHeader title="Libraries" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
