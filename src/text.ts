/**
 * What a required name or title must match to hold more than white space: JavaScript's `\S` is any
 * character `String.prototype.trim` keeps. A blank name is refused as an empty one is (the API's
 * `NonBlankString`, the subtitle form, the CLI's `--name`); a name with other characters is kept as sent.
 */
export const NOT_BLANK_PATTERN = "\\S";
const NOT_BLANK = new RegExp(NOT_BLANK_PATTERN, "u");

/** Whether text is empty or only white space. */
export const isBlank = (text: string): boolean => !NOT_BLANK.test(text);
