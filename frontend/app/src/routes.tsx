// Every screen of the app, as data: path, title, who may open it, where it sits in the
// navigation. Review stages are added in review/stages.ts and get their claim and item routes
// here.

import type { ReactNode } from "react";
import type { Me, Role } from "./api/types";
import { REVIEW_STAGES } from "./review/stages";
import { matchPath } from "./router";
import { AdjudicationQueue, AdjudicationScreen } from "./adjudication/Adjudication";
import { AuditList, AuditScreen } from "./audit/Audit";
import { Home } from "./home/Home";
import { AgreementScreen } from "./manage/agreement/Agreement";
import { AuditsScreen } from "./manage/audits/Audits";
import { ExperimentScreen } from "./manage/experiments/Experiment";
import { ExperimentsScreen } from "./manage/experiments/Experiments";
import { FindScreen } from "./manage/find/Find";
import { FoundItemScreen } from "./manage/find/Item";
import { JobsScreen } from "./manage/jobs/Jobs";
import { ModelRunsScreen } from "./manage/model-runs/ModelRuns";
import { PoolsScreen } from "./manage/pools/Pools";
import { ProgressScreen } from "./manage/progress/Progress";
import { ReleaseScreen, ReleasesScreen } from "./manage/releases/Releases";
import { RunsScreen } from "./manage/runs/Runs";
import { SeatsScreen } from "./manage/seats/Seats";
import { SnapshotsScreen } from "./manage/snapshots/Snapshots";
import { TrainingRunScreen, TrainingRunsScreen } from "./manage/training/Training";
import { ReviewClaim, ReviewItem } from "./review/Review";
import { VideoScreen, VideosScreen } from "./videos/Videos";

/** The header's menus, in order: the review work and its oversight, building the benchmark, the
 *  retrievers, publishing, and the operators' tools. */
export const MENUS = ["Review", "Build", "Models", "Releases", "Admin"] as const;
export type Section = (typeof MENUS)[number];

const STAFF: readonly Role[] = ["annotator", "adjudicator", "auditor", "manager"];

export interface RouteDef {
  path: string; // pattern for matchPath
  title: (params: Record<string, string>) => string;
  roles: readonly Role[]; // any of these may open it (empty: everyone signed in)
  nav?: { section: Section; label: string };
  render: (params: Record<string, string>, me: Me) => ReactNode;
}

const itemId = (params: Record<string, string>) => Number.parseInt(params.item, 10);
const num = (value: string) => Number.parseInt(value, 10);

export const ROUTES: readonly RouteDef[] = [
  { path: "/", title: () => "Your work", roles: [], render: (_, me) => <Home me={me} /> },
  ...REVIEW_STAGES.flatMap((spec): RouteDef[] => [
    {
      path: `/review/${spec.path}`,
      title: () => spec.title,
      roles: ["annotator"],
      nav: { section: "Review", label: spec.title },
      render: () => <ReviewClaim spec={spec} />,
    },
    {
      path: `/review/${spec.path}/:item`,
      title: (p) => `${spec.title} · item ${p.item}`,
      roles: ["annotator"],
      render: (p) => <ReviewItem key={p.item} spec={spec} itemId={itemId(p)} />,
    },
  ]),
  {
    path: "/adjudication",
    title: () => "Adjudication",
    roles: ["adjudicator"],
    nav: { section: "Review", label: "Adjudication queue" },
    render: () => <AdjudicationQueue />,
  },
  {
    path: "/adjudication/:item",
    title: (p) => `Adjudication · item ${p.item}`,
    roles: ["adjudicator"],
    render: (p) => <AdjudicationScreen key={p.item} itemId={itemId(p)} />,
  },
  { path: "/audit", title: () => "Audits to do", roles: ["auditor"], nav: { section: "Review", label: "Audits to do" }, render: () => <AuditList /> },
  {
    path: "/audit/:audit",
    title: (p) => `Audit ${p.audit}`,
    roles: ["auditor"],
    render: (p) => <AuditScreen key={p.audit} auditId={num(p.audit)} />,
  },
  { path: "/manage/progress", title: () => "Pipeline progress", roles: ["manager"], nav: { section: "Review", label: "Progress" }, render: () => <ProgressScreen /> },
  { path: "/manage/agreement", title: () => "Agreement", roles: ["manager"], nav: { section: "Review", label: "Agreement" }, render: () => <AgreementScreen /> },
  { path: "/manage/jobs", title: () => "Jobs", roles: ["manager"], nav: { section: "Admin", label: "Jobs" }, render: () => <JobsScreen /> },
  { path: "/manage/runs", title: () => "Proposal runs", roles: ["manager"], nav: { section: "Build", label: "Runs" }, render: () => <RunsScreen /> },
  { path: "/manage/find", title: () => "Find items, queries and relations", roles: ["manager"], nav: { section: "Admin", label: "Find" }, render: () => <FindScreen /> },
  {
    path: "/manage/items/:item",
    title: (p) => `Item ${p.item}`,
    roles: ["manager"],
    render: (p) => <FoundItemScreen key={p.item} itemId={itemId(p)} />,
  },
  { path: "/manage/seats", title: () => "Seats and leases", roles: ["manager"], nav: { section: "Admin", label: "Seats" }, render: () => <SeatsScreen /> },
  { path: "/manage/pools", title: () => "Frozen pools", roles: ["manager"], nav: { section: "Build", label: "Pools" }, render: () => <PoolsScreen /> },
  {
    path: "/manage/model-runs",
    title: () => "Describer, query-writer and mining runs",
    roles: ["manager"],
    nav: { section: "Build", label: "Model runs" },
    render: () => <ModelRunsScreen />,
  },
  {
    path: "/manage/snapshots",
    title: () => "Completeness and snapshots",
    roles: ["manager"],
    nav: { section: "Build", label: "Snapshots" },
    render: () => <SnapshotsScreen />,
  },
  { path: "/manage/training", title: () => "Training runs", roles: ["manager"], nav: { section: "Models", label: "Training" }, render: () => <TrainingRunsScreen /> },
  {
    path: "/manage/training/:run",
    title: (p) => `Training run ${p.run}`,
    roles: ["manager"],
    render: (p) => <TrainingRunScreen key={p.run} runId={num(p.run)} />,
  },
  { path: "/manage/experiments", title: () => "Experiments", roles: ["manager"], nav: { section: "Models", label: "Experiments" }, render: () => <ExperimentsScreen /> },
  {
    path: "/manage/experiments/:experiment",
    title: (p) => `Experiment ${p.experiment}`,
    roles: ["manager"],
    render: (p) => <ExperimentScreen key={p.experiment} experimentId={num(p.experiment)} />,
  },
  { path: "/manage/audits", title: () => "Audits", roles: ["manager"], nav: { section: "Releases", label: "Audits" }, render: () => <AuditsScreen /> },
  { path: "/manage/releases", title: () => "Releases", roles: ["manager"], nav: { section: "Releases", label: "Releases" }, render: () => <ReleasesScreen /> },
  {
    path: "/manage/releases/:release",
    title: (p) => `Release ${p.release}`,
    roles: ["manager"],
    render: (p) => <ReleaseScreen key={p.release} releaseId={num(p.release)} />,
  },
  { path: "/videos", title: () => "Videos", roles: STAFF, nav: { section: "Build", label: "Videos" }, render: () => <VideosScreen /> },
  {
    path: "/videos/:video/:trajectory?",
    title: (p) => `Video ${p.video}${p.trajectory ? ` · trajectory ${p.trajectory}` : ""}`,
    roles: STAFF,
    render: (p) => (
      <VideoScreen videoId={Number.parseInt(p.video, 10)} trajectoryId={p.trajectory ? Number.parseInt(p.trajectory, 10) : undefined} />
    ),
  },
];

export function findRoute(pathname: string): { route: RouteDef; params: Record<string, string> } | null {
  for (const route of ROUTES) {
    const params = matchPath(route.path, pathname);
    const numeric = ["item", "video", "trajectory", "run", "release", "audit", "experiment"].every((k) => params?.[k] === undefined || /^\d+$/.test(params[k]));
    if (params && numeric) return { route, params };
  }
  return null;
}

export function mayOpen(route: RouteDef, me: Me): boolean {
  return route.roles.length === 0 || route.roles.some((r) => me.roles.includes(r));
}

export interface NavMenu {
  section: Section;
  routes: RouteDef[];
}

/** The header's menus for `me`: each with the screens of it that `me` may open, in route order;
 *  a menu with none is left out. */
export function navMenus(me: Me): NavMenu[] {
  return MENUS.map((section) => ({ section, routes: ROUTES.filter((r) => r.nav?.section === section && mayOpen(r, me)) }))
    .filter((m) => m.routes.length > 0);
}

/** Whether `pathname` is the screen of `route` or one of its pages (a run of the runs list). */
export function isUnder(route: RouteDef, pathname: string): boolean {
  const base = route.path.replace(/\/$/, "");
  return pathname === base || pathname.startsWith(`${base}/`);
}

/** The menu holding the screen of `pathname` (null: the home page, or a page of no menu). */
export function menuOf(pathname: string): Section | null {
  const hit = ROUTES.filter((r) => r.nav && isUnder(r, pathname)).sort((a, b) => b.path.length - a.path.length)[0];
  return hit?.nav?.section ?? null;
}

/** The home page's links for `me`: every screen of the menus except the review work, which has
 *  its queue cards there. */
export function homeSections(me: Me): NavMenu[] {
  const work = new Set(["/adjudication", ...REVIEW_STAGES.map((s) => `/review/${s.path}`)]);
  return navMenus(me).map((m) => ({ ...m, routes: m.routes.filter((r) => !work.has(r.path)) })).filter((m) => m.routes.length > 0);
}
