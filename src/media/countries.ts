// The package's core without its 80 language files (the package's own entry for browsers): only the
// codes are needed here, and its Node entry reads and parses every language at start (about 23 ms).
import countries from "i18n-iso-countries/index.js";

// ISO 3166-1 reserves AA, QM-QZ, XA-XZ and ZZ for user assignment; the list package includes XK
// (Kosovo, a user-assigned code in common use), which the contract does not count as official.
const userAssigned = (code: string): boolean =>
  code === "AA" || code === "ZZ" || /^Q[M-Z]$/.test(code) || /^X[A-Z]$/.test(code);

/** Officially assigned ISO 3166-1 alpha-2 codes, upper-case, sorted. */
export const OFFICIAL_COUNTRY_CODES: readonly string[] = Object.keys(countries.getAlpha2Codes())
  .filter((code) => !userAssigned(code))
  .sort();

const anyCase = (code: string) => [...code].map((letter) => `[${letter}${letter.toLowerCase()}]`).join("");

/** A JSON-schema pattern accepting exactly the official codes, in any letter case. */
export const COUNTRY_CODE_PATTERN = `^(?:${OFFICIAL_COUNTRY_CODES.map(anyCase).join("|")})$`;
