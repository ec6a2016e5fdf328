interface Named {
  id: string;
  name: string;
}

/**
 * Names need not be unique (the API allows two libraries of one name): a name another item of
 * `among` shares is told apart by the first 8 characters of its id.
 */
export const nameApart = (item: Named, among: readonly Named[]): string =>
  among.some((other) => other.id !== item.id && other.name === item.name)
    ? `${item.name} (${item.id.slice(0, 8)})`
    : item.name;
