/**
 * Control characters (Unicode's `Cc`: the C0 controls U+0000-U+001F, DEL and the C1 controls
 * U+0080-U+009F), as a character class body. A name or title is one line shown in lists, logs and
 * terminals: a line break, a tab or an escape sequence (`\u001b[31m`) in it would break or restyle
 * what shows it. Multi-line text (descriptions) keeps them.
 */
const CONTROL_CHARACTERS = "\\u0000-\\u001f\\u007f-\\u009f";
const CONTROL = new RegExp(`[${CONTROL_CHARACTERS}]`, "u");

/**
 * What a required name or title must match: more than white space (JavaScript's `\S` is any
 * character `String.prototype.trim` keeps), and no control character. A blank name is refused as
 * an empty one is (`validation_min`), one with a control character for its format; the same rules
 * hold for the API's `NonBlankString`, the subtitle form and the CLI's `--name`. A name is otherwise
 * kept as sent. The look-ahead keeps the match linear in the length, for a body of any size.
 */
export const NAME_PATTERN = `^(?=[\\s\\S]*\\S)[^${CONTROL_CHARACTERS}]*$`;
/** What a single-line text that may be empty must match (`NAME_PATTERN` without the non-blank part). */
export const LINE_PATTERN = `^[^${CONTROL_CHARACTERS}]*$`;
const NOT_BLANK = /\S/u;

/** What `NAME_PATTERN` takes besides a non-blank name, in words: the end of its validation message. */
export const NAME_FORMAT = "text on one line without control characters (U+0000-U+001F, U+007F-U+009F)";

/** Whether text is empty or only white space. */
export const isBlank = (text: string): boolean => !NOT_BLANK.test(text);

/** Whether text holds a control character, which a name or title may not (`NAME_PATTERN`). */
export const hasControlCharacter = (text: string): boolean => CONTROL.test(text);
