import type { ComputationKind } from '../api.js';

/** What differs between the computed traits page and the audiences page. */
export interface Kind {
  readonly kind: ComputationKind;
  readonly page: string;
  readonly route: string;
  readonly title: string;
  readonly one: string;
  readonly listField: 'audiences' | 'computedTraits';
  readonly example: string;
  readonly explain: string;
  /** What the empty list says a new one does. */
  readonly createHint: string;
}

export const KINDS: Readonly<Record<ComputationKind, Kind>> = {
  audience: {
    kind: 'audience',
    page: 'audiences',
    route: '/audiences',
    title: 'Audiences',
    one: 'audience',
    listField: 'audiences',
    example: '{"performed": {"event": "Order Completed", "within": "30d", "count": {"op": ">=", "value": 2}}}',
    explain:
      'A condition on profiles: performed, notPerformed, trait, computedTrait, inAudience, notInAudience, combined with and, or and not. Members are synced as identify messages with the audience key set to true when they enter and false when they leave.',
    createHint: 'it is computed over the stored messages first, then kept up to date, and its members are synced to the sources you pick.',
  },
  trait: {
    kind: 'trait',
    page: 'computed-traits',
    route: '/computed-traits',
    title: 'Computed traits',
    one: 'computed trait',
    listField: 'computedTraits',
    example: '{"type": "event_counter", "event": "Order Completed", "within": "30d"}',
    explain:
      'A value per profile: event_counter, aggregation (sum, avg, min, max), most_frequent, first, last, unique_list or unique_list_count over the events that match. Each new value is synced as an identify message with the trait key set to it.',
    createHint: 'it is computed over the stored messages first, then kept up to date, and its values are synced to the sources you pick.',
  },
};
