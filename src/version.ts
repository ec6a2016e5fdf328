/** The version Cumulo reports: OpenAPI info, webhook User-Agent. */
export const API_VERSION = "0.1.0";
