import "./cdn.css";
import { lazy, Suspense } from "react";
import { Outlet, Route, Routes } from "react-router";
import { PageHeader } from "../../components/Layout.tsx";
import { SectionTabs } from "../../components/SectionTabs.tsx";
import { Loading } from "../../components/States.tsx";
import { NotFoundPage } from "../not-found/NotFoundPage.tsx";
import { Distributions } from "./Distributions.tsx";

// The charts (and their library) load only when the analytics tab is opened.
const Analytics = lazy(() => import("./Analytics.tsx").then((m) => ({ default: m.Analytics })));

/** CDN: distributions with their purges (`/cdn`) and traffic analytics (`/cdn/analytics`). */
export function CdnPage() {
  return (
    <Routes>
      <Route element={<CdnSections />}>
        <Route index element={<Distributions />} />
        <Route path="analytics" element={<Analytics />} />
      </Route>
      {/* Any other address under /cdn is no page, as at the top level. */}
      <Route path="*" element={<NotFoundPage />} />
    </Routes>
  );
}

function CdnSections() {
  return (
    <>
      <PageHeader title="CDN" />
      <SectionTabs
        label="CDN sections"
        tabs={[
          { to: "/cdn", label: "Distributions" },
          { to: "/cdn/analytics", label: "Analytics" },
        ]}
      />
      <Suspense fallback={<Loading what="Loading charts" />}>
        <Outlet />
      </Suspense>
    </>
  );
}
