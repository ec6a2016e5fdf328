import { Outlet, Route, Routes } from "react-router";
import { PageHeader } from "../../components/Layout.tsx";
import { SectionTabs } from "../../components/SectionTabs.tsx";
import { NotFoundPage } from "../not-found/NotFoundPage.tsx";
import { Disks } from "./Disks.tsx";
import { FloatingIps } from "./FloatingIps.tsx";
import { LoadBalancers } from "./LoadBalancers.tsx";
import { ObjectStorage } from "./ObjectStorage.tsx";
import { Tokens } from "./Tokens.tsx";
import { Vms } from "./Vms.tsx";

const SECTIONS = [
  { path: "", label: "Tokens", element: <Tokens /> },
  { path: "vms", label: "Virtual machines", element: <Vms /> },
  { path: "disks", label: "Disks", element: <Disks /> },
  { path: "floating-ips", label: "Floating IPs", element: <FloatingIps /> },
  { path: "load-balancers", label: "Load balancers", element: <LoadBalancers /> },
  { path: "object-storage", label: "Object storage", element: <ObjectStorage /> },
];

/** Cloud resources of the default location, one tab each (`/cloud`, `/cloud/vms`, ...). */
export function CloudPage() {
  return (
    <Routes>
      <Route element={<CloudSections />}>
        {SECTIONS.map((section) =>
          section.path ? (
            <Route key={section.label} path={section.path} element={section.element} />
          ) : (
            <Route key={section.label} index element={section.element} />
          ),
        )}
      </Route>
      {/* Any other address under /cloud is no page, as at the top level. */}
      <Route path="*" element={<NotFoundPage />} />
    </Routes>
  );
}

function CloudSections() {
  return (
    <>
      <PageHeader title="Cloud" />
      <SectionTabs
        label="Cloud sections"
        tabs={SECTIONS.map((section) => ({
          to: section.path ? `/cloud/${section.path}` : "/cloud",
          label: section.label,
        }))}
      />
      <Outlet />
    </>
  );
}
