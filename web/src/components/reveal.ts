import { useEffect, useRef } from "react";

/**
 * A panel that a row's button opens below its list (a distribution's Purges, an endpoint's
 * Deliveries) appeared out of view, so on a phone or below a long list the button seemed to do
 * nothing. Each time `opened` grows (the button was used, also again on the same row), the panel's
 * heading (give it `tabIndex={-1}`) takes the focus: the browser scrolls it into view, and a screen
 * reader says where the person now is. A panel opened from the address alone (a link, a reload) is
 * left where it is.
 */
export function useRevealWhenOpened<E extends HTMLElement>(opened: number) {
  const heading = useRef<E>(null);
  useEffect(() => {
    if (opened > 0) heading.current?.focus();
  }, [opened]);
  return heading;
}
