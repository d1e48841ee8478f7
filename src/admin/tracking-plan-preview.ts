import type { FastifyInstance } from 'fastify';
import { compileTrackingPlan, parseTrackingPlan, type TrackingPlanDefinition, TrackingPlanError } from '../domain/tracking-plan.js';
import { type PreviewVerdict, previewTrackingPlan } from '../domain/tracking-plan-preview.js';
import { ApiError } from '../errors.js';
import { type JsonSchema, documented } from '../route-documentation.js';
import type { Store } from '../store/store.js';
import { limitParam, rejectUnknownFields, requireObject } from './validate.js';

export const DEFAULT_PREVIEW_MESSAGES = 20;
export const MAX_PREVIEW_MESSAGES = 100;

export interface PreviewView {
  /** How many of the messages checked the plan would flag or block (allowed violations not counted). */
  readonly flagged: number;
  readonly blocked: number;
  readonly messages: Array<Omit<PreviewVerdict, 'receivedAt'> & { receivedAt: string; message: unknown }>;
}

/**
 * Checks a source's latest stored messages against a plan that is not
 * stored: for writing a plan (or a change to one) against real traffic
 * before it applies. Nothing is stored or changed.
 */
export class TrackingPlanPreview {
  constructor(private readonly store: Store) {}

  async preview(sourceId: string, input: unknown): Promise<PreviewView> {
    const body = requireObject(input);
    rejectUnknownFields(body, ['plan', 'limit']);
    const limit = limitParam(body['limit'], DEFAULT_PREVIEW_MESSAGES, MAX_PREVIEW_MESSAGES);
    let plan: TrackingPlanDefinition;
    try {
      plan = parseTrackingPlan(body['plan']);
    } catch (error) {
      if (error instanceof TrackingPlanError) throw new ApiError('invalid_tracking_plan', error.message, { cause: error });
      throw error;
    }
    if ((await this.store.getSource(sourceId)) === undefined) throw new ApiError('not_found', `no source ${sourceId}`);
    const stored = (await this.store.listRecentMessages(sourceId, limit)).map((m) => {
      let message: unknown;
      try {
        message = JSON.parse(m.body);
      } catch {
        message = m.body;
      }
      return { seq: m.seq, receivedAt: m.receivedAt, type: m.type, status: m.status, message };
    });
    const verdicts = previewTrackingPlan(compileTrackingPlan('preview', 0, plan), stored);
    return {
      flagged: verdicts.filter((v) => v.action === 'flag').length,
      blocked: verdicts.filter((v) => v.action === 'block').length,
      messages: verdicts.map((v, i) => ({ ...v, receivedAt: new Date(v.receivedAt).toISOString(), message: stored[i]!.message })),
    };
  }
}

const violation: JsonSchema = {
  type: 'object',
  properties: {
    type: { type: 'string' },
    message: { type: 'string' },
    property: { type: 'string' },
    meta: { type: 'object', properties: { instancePath: { type: 'string' }, schemaPath: { type: 'string' } } },
  },
};

export const TRACKING_PLAN_PREVIEW_SCHEMAS = documented({
  preview: {
    summary: "Check the source's latest messages against a plan, storing nothing",
    description:
      'Runs the plan (not stored) over the source\'s latest stored messages, newest first, as processing would, and answers what it would do with each: pass, flag or block, with the violations. The marks of the plan in force are removed from each message before the check. Nothing is stored or changed.',
    tags: ['tracking plans'],
    params: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
    body: {
      type: 'object',
      properties: { plan: { type: 'object', description: 'A tracking plan, as POST /sources/{id}/tracking-plan takes it' }, limit: { type: 'integer', minimum: 1, maximum: MAX_PREVIEW_MESSAGES, default: DEFAULT_PREVIEW_MESSAGES } },
      required: ['plan'],
    },
    'x-responses': {
      200: {
        description: 'What the plan would do with each message',
        schema: {
          type: 'object',
          properties: {
            flagged: { type: 'integer' },
            blocked: { type: 'integer' },
            messages: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  seq: { type: 'integer' },
                  receivedAt: { type: 'string', format: 'date-time' },
                  type: { type: 'string' },
                  status: { type: 'string' },
                  event: { type: 'string' },
                  action: { enum: ['pass', 'flag', 'block', 'skipped'] },
                  violations: { type: 'array', items: violation },
                  message: {},
                },
              },
            },
          },
        },
      },
    },
    'x-errors': ['invalid_request', 'invalid_tracking_plan', 'not_found'],
    'x-validation-codes': { plan: 'invalid_tracking_plan' },
  },
});

/** `POST /sources/:id/tracking-plan/preview`, as an `extensions` entry of `adminRoutes`. */
export function trackingPlanPreviewRoutes(preview: TrackingPlanPreview): (app: FastifyInstance) => void {
  return (app) => {
    app.post<{ Params: { id: string } }>('/sources/:id/tracking-plan/preview', { schema: TRACKING_PLAN_PREVIEW_SCHEMAS.preview }, async (request) =>
      preview.preview(request.params.id, request.body),
    );
  };
}
