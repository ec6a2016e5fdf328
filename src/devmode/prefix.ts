/** Where developer mode's routes live: `/_cumulo` and below. */
export const DEV_PREFIX = "/_cumulo";

const DEVELOPER_MODE_URL = new RegExp(`^${DEV_PREFIX}(?:[/?]|$)`);

/** Whether a request URL (or a route) is one of developer mode's own calls. */
export const isDeveloperModeCall = (url: string): boolean => DEVELOPER_MODE_URL.test(url);
