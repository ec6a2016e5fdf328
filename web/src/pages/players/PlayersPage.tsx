import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

export function PlayersPage() {
  return (
    <>
      <PageHeader title="Players" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
