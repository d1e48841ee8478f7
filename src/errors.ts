/**
 * Every error code the HTTP APIs answer with. docs/errors.md documents each
 * one, and a test keeps the two in step: add a code here and there together.
 */
export const ERROR_CODES = {
  // Tracking API: {"success":false,"code":…,"message":…}
  invalid_json: 400,
  body_not_object: 400,
  body_too_large: 400,
  batch_element_too_large: 400,
  batch_too_large: 400,
  too_many_batch_elements: 400,
  invalid_batch: 400,
  invalid_encoding: 400,
  unsupported_encoding: 415,
  invalid_write_key: 401,
  storage_unavailable: 503,
  overloaded: 503,
  // Browser libraries' settings, bundle and source config
  unknown_write_key: 404,
  invalid_host: 400,
  file_not_found: 404,
  // Admin API: {"error":{"code":…,"message":…}}
  unauthorized: 401,
  invalid_request: 400,
  invalid_receivers: 400,
  private_receiver: 400,
  invalid_filter: 400,
  unknown_receiver: 400,
  invalid_definition: 400,
  invalid_transformation: 400,
  invalid_tracking_plan: 400,
  invalid_function: 400,
  not_found: 404,
  profile_not_found: 404,
  key_conflict: 409,
  delivery_not_failed: 409,
  standard_webhooks_not_enabled: 409,
  transformation_in_use: 409,
  function_limit_reached: 409,
  function_name_taken: 409,
  too_many_replays: 409,
  // Both
  route_not_found: 404,
  invalid_path: 400,
  path_too_long: 414,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** An error the API answers with its own status and stable code. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly statusCode: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.statusCode = ERROR_CODES[code];
  }
}
