import { Link } from "react-router";
import { PageHeader } from "../../components/Layout.tsx";

export function NotFoundPage() {
  return (
    <>
      <PageHeader title="Page not found" />
      <p>
        There is no console page here. <Link to="/libraries">Go to your libraries</Link>.
      </p>
    </>
  );
}
