import { PageHeader } from "../../components/Layout.tsx";
import { Empty } from "../../components/States.tsx";

export function VideoPage() {
  return (
    <>
      <PageHeader title="Video" />
      <Empty>
        <p>This page is not built yet.</p>
      </Empty>
    </>
  );
}
