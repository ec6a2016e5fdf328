import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

export function LibraryPage() {
  return (
    <>
      <PageHeader title="Library" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
