const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether free text (a path segment, a query value, a CLI argument) is a UUID, in either case. */
export const isUuid = (value: string): boolean => UUID.test(value);
