import { useEffect, useState } from "react";
import { useLocation, useNavigate } from "react-router";
import { FormError, PasswordField } from "../../components/Field.tsx";
import { ThemePicker } from "../../components/ThemePicker.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useSession } from "../../session.tsx";

/**
 * Where `cumulo users create` sends an invited person: `/console/invite#<token>`. The token sits after
 * `#`, so it never reaches a server log; the person chooses a password and is signed in.
 */
export function InvitePage() {
  const { acceptInvitation } = useSession();
  const navigate = useNavigate();
  // Read from the router's location, so a link that changes only the fragment gives its own token.
  const token = useLocation().hash.slice(1);
  const [password, setPassword] = useState("");
  const [repeated, setRepeated] = useState("");
  const [mismatch, setMismatch] = useState<string>();
  const { submit, busy, errors, formError } = useSubmit(async () => {
    // An unknown, used or expired token comes back as the API's error on `token`, shown below.
    await acceptInvitation(token, password);
    navigate("/libraries", { replace: true });
  });
  useEffect(() => {
    document.title = "Accept invitation · Cumulo console";
  }, []);

  return (
    <main id="main" className="sign-in">
      <form
        className="card"
        aria-labelledby="invite-title"
        onSubmit={submitting(async () => {
          setMismatch(password === repeated ? undefined : "The two passwords differ.");
          if (password === repeated) await submit();
        })}
      >
        <h1 id="invite-title">Choose your password</h1>
        {token === "" ? (
          <p className="field-error" role="alert">
            This link has no invitation token: open the whole link you were given.
          </p>
        ) : (
          <>
            <PasswordField
              label="New password"
              name="password"
              error={errors.password}
              hint="10 to 200 characters"
              autoComplete="new-password"
              minLength={10}
              value={password}
              onChange={(value) => {
                // Said of the passwords as they were: it goes once either changes.
                setMismatch(undefined);
                setPassword(value);
              }}
            />
            <PasswordField
              label="Repeat the password"
              name="repeated"
              error={mismatch}
              autoComplete="new-password"
              value={repeated}
              onChange={(value) => {
                setMismatch(undefined);
                setRepeated(value);
              }}
            />
            <FormError message={formError ?? errors.token} />
            <button type="submit" className="primary" disabled={busy}>
              {busy ? "Saving…" : "Set password and sign in"}
            </button>
          </>
        )}
      </form>
      <ThemePicker />
    </main>
  );
}
