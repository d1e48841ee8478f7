import type { Route } from '../main.js';
import { PageTitle } from '../ui.js';

export function OverviewPage(_props: { route: Route }) {
  return (
    <section aria-labelledby="page-title">
      <PageTitle>Overview</PageTitle>
    </section>
  );
}
