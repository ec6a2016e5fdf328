import { useState } from "react";
import { FormError, PasswordField } from "../../components/Field.tsx";
import { PageHeader } from "../../components/Layout.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useSession, useSignedIn } from "../../session.tsx";

/** The signed-in person's own account: who they are, and a password change that ends other sessions. */
export function AccountPage() {
  const session = useSignedIn();
  const { changePassword } = useSession();
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [done, setDone] = useState(false);
  const { submit, busy, errors, formError } = useSubmit(async () => {
    setDone(false);
    await changePassword(current, next);
    setCurrent("");
    setNext("");
    setDone(true);
  });

  return (
    <>
      <PageHeader title="Your account" />
      <section className="card" aria-labelledby="account-who">
        <h2 id="account-who">Signed in as</h2>
        <p>
          {session.user.email} in {session.organization.name}
          {session.readOnly ? " (read-only: you can look at everything and change nothing)" : ""}
        </p>
      </section>
      <form className="card" aria-labelledby="account-password" onSubmit={submitting(submit)}>
        <h2 id="account-password">Change password</h2>
        <p>Changing it signs you out everywhere else.</p>
        <PasswordField
          label="Current password"
          name="current_password"
          error={errors.current_password}
          autoComplete="current-password"
          value={current}
          onChange={setCurrent}
        />
        <PasswordField
          label="New password"
          name="new_password"
          error={errors.new_password}
          hint="10 to 200 characters"
          autoComplete="new-password"
          value={next}
          onChange={setNext}
        />
        <FormError message={formError} />
        {done && <p role="status">Password changed. Your other sessions have ended.</p>}
        <button type="submit" className="primary" disabled={busy}>
          {busy ? "Saving…" : "Change password"}
        </button>
      </form>
    </>
  );
}
