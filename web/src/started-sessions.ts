/**
 * The sessions this console started in this browser (docs/console.md, "Sessions the console did not
 * start"). localStorage belongs to the console's origin (scheme, host and port), which a page on
 * another port of the same host cannot read or write, while it can set the session cookie: a session
 * the console finds without a mark here was planted, and is not used.
 */
const STORAGE_KEY = "cumulo-started-sessions";
/** Enough for the sessions of several tabs and sign-ins; the oldest marks go first. */
const KEPT = 10;

/**
 * A mark of the session, not its secret: FNV-1a (64 bits) of its CSRF token. Works where Web Crypto
 * does not (plain HTTP on a host name); 64 bits of a 256-bit token tell nothing usable about it.
 */
function markOf(csrfToken: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(csrfToken)) {
    hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(36);
}

function storedMarks(): string[] {
  try {
    const stored: unknown = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "[]");
    return Array.isArray(stored) ? stored.filter((mark) => typeof mark === "string") : [];
  } catch {
    return [];
  }
}

function storeMarks(marks: string[]) {
  if (marks.length === 0) localStorage.removeItem(STORAGE_KEY);
  else localStorage.setItem(STORAGE_KEY, JSON.stringify(marks.slice(-KEPT)));
}

/** Records a session this console just started: a sign-in, an accepted invitation, a new password. */
export function markStarted(csrfToken: string) {
  const mark = markOf(csrfToken);
  storeMarks([...storedMarks().filter((kept) => kept !== mark), mark]);
}

export const startedHere = (csrfToken: string): boolean => storedMarks().includes(markOf(csrfToken));

/** Forgets a session that was signed out. */
export function forgetStarted(csrfToken: string) {
  const mark = markOf(csrfToken);
  storeMarks(storedMarks().filter((kept) => kept !== mark));
}
