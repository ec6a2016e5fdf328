/**
 * Names and titles that hold only white space: ASCII spaces, a tab and line ends, and Unicode spaces
 * (no-break, ideographic, line separator). Each is refused where a non-blank name is required.
 */
export const BLANK_TEXTS = ["   ", "\t\n", "\u00a0\u3000\u2028"];

/** The validation error of a blank (or empty) required name: as an empty one reads. */
export const blankError = (field: string) => ({
  field,
  code: "validation_min",
  message: `The ${field} field must not be empty.`,
});
