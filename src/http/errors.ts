export type ValidationCode =
  | "validation_required"
  | "validation_type"
  | "validation_enum"
  | "validation_format"
  | "validation_min"
  | "validation_max"
  | "validation_mimes"
  | "validation_credentials";

export interface FieldError {
  field: string;
  code: ValidationCode;
  message: string;
}

/**
 * The one error type routes and services throw for expected failures. The error handler renders it
 * in the body shape of the request's API group (media-style envelope or cloud style).
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly options: {
      fieldErrors?: FieldError[];
      /** Machine-readable `error` for 401/403/429 bodies. */
      error?: string;
      code?: string;
      /** A body that replaces the group's shape (SPEC.md's `{}` for an unreachable provider). */
      body?: unknown;
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  static invalidRequest(message = "Invalid Request"): ApiError {
    return new ApiError(400, message);
  }

  static validation(fieldErrors: FieldError[]): ApiError {
    return new ApiError(400, "Invalid Request", { fieldErrors });
  }

  static field(field: string, code: ValidationCode, message: string): ApiError {
    return ApiError.validation([{ field, code, message }]);
  }

  static unauthorized(message: string, code?: string): ApiError {
    return new ApiError(401, message, { error: "unauthorized", ...(code ? { code } : {}) });
  }

  static forbidden(message: string): ApiError {
    return new ApiError(403, message, { error: "forbidden" });
  }

  /** `thing` names the resource in cloud bodies ("Load balancer not found"); media says "Resource not found". */
  static notFound(thing = "Resource"): ApiError {
    return new ApiError(404, `${thing} not found`);
  }

  static conflict(message: string): ApiError {
    return new ApiError(409, message);
  }

  static payloadTooLarge(): ApiError {
    return new ApiError(413, "Payload Too Large");
  }

  static unsupportedMediaType(): ApiError {
    return new ApiError(415, "Unsupported Media Type");
  }
}
