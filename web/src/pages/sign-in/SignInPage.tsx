import { useEffect, useState } from "react";
import { Navigate, useLocation, useNavigate } from "react-router";
import { ApiFailure } from "../../api.ts";
import { Field, FormError, PasswordField } from "../../components/Field.tsx";
import { ThemePicker } from "../../components/ThemePicker.tsx";
import { submitting, useSubmit } from "../../form.ts";
import { useSession } from "../../session.tsx";

export function SignInPage() {
  const { session, refused, signIn } = useSession();
  const navigate = useNavigate();
  const location = useLocation();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const state = location.state as { from?: string; ended?: boolean } | null;
  const from = state?.from ?? "/libraries";
  const { submit, busy, errors, formError, reset } = useSubmit(async () => {
    try {
      await signIn(email, password);
    } catch (error) {
      // One answer for a wrong email and a wrong password, as the API gives it.
      if (error instanceof ApiFailure && error.status === 401) {
        throw new Error("The email or password is not right.");
      }
      throw error;
    }
    navigate(from, { replace: true });
  });
  useEffect(() => {
    document.title = "Sign in · Cumulo console";
  }, []);
  if (session) return <Navigate to={from} replace />;

  return (
    <main id="main" className="sign-in">
      <form className="card" aria-labelledby="sign-in-title" onSubmit={submitting(submit)}>
        <h1 id="sign-in-title">Sign in to Cumulo</h1>
        {refused ? (
          <p className="warning" role="status">
            A session this console did not start was found in your browser and was not used. Sign in with your
            own account.
          </p>
        ) : (
          state?.ended && (
            <p className="warning" role="status">
              Your session has ended. Sign in again.
            </p>
          )
        )}
        <Field label="Email" name="email" error={errors.email}>
          {(control) => (
            <input
              {...control}
              // Not `type="email"`: its check refuses letters such as `ü` before the `@`, so people
              // with such an address could not sign in here at all (QA of session 47).
              type="text"
              inputMode="email"
              autoCapitalize="none"
              spellCheck={false}
              autoComplete="username"
              required
              value={email}
              onChange={(event) => {
                // A refusal is about what was sent: it goes once the person changes it (the browser's
                // own checks may keep the next submission from being made at all).
                reset();
                setEmail(event.target.value);
              }}
            />
          )}
        </Field>
        <PasswordField
          label="Password"
          name="password"
          error={errors.password}
          autoComplete="current-password"
          value={password}
          onChange={(value) => {
            reset();
            setPassword(value);
          }}
        />
        <FormError message={formError} />
        <button type="submit" className="primary" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
      <ThemePicker />
    </main>
  );
}
