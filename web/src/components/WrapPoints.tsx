import { Fragment } from "react";

/** After a dot, or a slash that does not begin `//`. */
const WRAP_AFTER = /(?<=\.|\/(?!\/))/;

/**
 * A host name or URL that may wrap after its dots and slashes (a `<wbr>` each), as a reader splits
 * it. A heading's or a cell's `overflow-wrap: anywhere` alone broke a long one mid-word
 * ("broadcastingcompanye / urope"); it stays the last resort for a part longer than the line.
 */
export function WrapPoints({ text }: { text: string }) {
  let offset = 0;
  return (
    <>
      {text.split(WRAP_AFTER).map((part) => {
        const at = offset;
        offset += part.length;
        return (
          <Fragment key={at}>
            {at > 0 && <wbr />}
            {part}
          </Fragment>
        );
      })}
    </>
  );
}
