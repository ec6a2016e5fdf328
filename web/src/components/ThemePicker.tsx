import { useId } from "react";
import { chooseTheme, type ThemeChoice, useThemeChoice } from "../theme.ts";

const CHOICES: { value: ThemeChoice; label: string }[] = [
  { value: "system", label: "System" },
  { value: "light", label: "Light" },
  { value: "dark", label: "Dark" },
];

/** Light, dark or the system's theme: in the top bar, and below the sign-in and invitation forms. */
export function ThemePicker() {
  const id = useId();
  const choice = useThemeChoice();
  return (
    <span className="theme-picker">
      <label htmlFor={id}>Theme</label>
      <select id={id} value={choice} onChange={(event) => chooseTheme(event.target.value as ThemeChoice)}>
        {CHOICES.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
    </span>
  );
}
