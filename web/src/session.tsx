import {
  createContext,
  type ReactNode,
  useCallback,
  useContext,
  useEffect,
  useMemo,
  useRef,
  useState,
} from "react";
import { ApiFailure, api, call, onSessionEnded, setCsrfToken } from "./api.ts";

export interface ConsoleSession {
  user: { id: number; uuid: string; email: string; read_only: boolean };
  organization: { id: string; name: string };
  csrf_token: string;
}

interface SessionState {
  /** `undefined` while the first check runs; `null` when nobody is signed in. */
  session: ConsoleSession | null | undefined;
  /** True once the API refused the session of this tab (it ended elsewhere); false after a sign-in. */
  ended: boolean;
  signIn(email: string, password: string): Promise<void>;
  signOut(): Promise<void>;
  /** Sets the password of an invited user and signs them in. */
  acceptInvitation(token: string, password: string): Promise<void>;
  /** Ends every session of the user; this tab continues with the fresh one the answer sets. */
  changePassword(currentPassword: string, newPassword: string): Promise<void>;
  /** Read-only users see every page and every button, disabled where it would change something. */
  readOnly: boolean;
}

const SessionContext = createContext<SessionState | undefined>(undefined);

function remember(session: ConsoleSession | null) {
  setCsrfToken(session?.csrf_token);
  return session;
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const [ended, setEnded] = useState(false);

  useEffect(() => {
    call(api.GET("/v1/console/session")).then(
      (body) => setSession(remember(body.data)),
      () => setSession(remember(null)),
    );
  }, []);

  // Any 401 while signed in means the session is gone: the pages lead to sign-in (RequireSession).
  const signedIn = useRef(false);
  signedIn.current = Boolean(session);
  useEffect(() => {
    onSessionEnded(() => {
      if (!signedIn.current) return;
      setEnded(true);
      setSession(remember(null));
    });
    return () => onSessionEnded(undefined);
  }, []);

  const signIn = useCallback(async (email: string, password: string) => {
    const body = await call(api.POST("/v1/console/session", { body: { email, password } }));
    setEnded(false);
    setSession(remember(body.data));
  }, []);

  const signOut = useCallback(async () => {
    try {
      await call(api.DELETE("/v1/console/session"));
    } catch (error) {
      // A session that already ended is signed out all the same.
      if (!(error instanceof ApiFailure && error.status === 401)) throw error;
    }
    setSession(remember(null));
  }, []);

  const acceptInvitation = useCallback(async (token: string, password: string) => {
    const body = await call(api.POST("/v1/console/invitations/accept", { body: { token, password } }));
    setEnded(false);
    setSession(remember(body.data));
  }, []);

  const changePassword = useCallback(async (currentPassword: string, newPassword: string) => {
    await call(
      api.PUT("/v1/console/password", {
        body: { current_password: currentPassword, new_password: newPassword },
      }),
    );
    // The fresh session has a CSRF token of its own.
    const body = await call(api.GET("/v1/console/session"));
    setSession(remember(body.data));
  }, []);

  const value = useMemo(
    () => ({
      session,
      ended,
      signIn,
      signOut,
      acceptInvitation,
      changePassword,
      readOnly: session?.user.read_only ?? true,
    }),
    [session, ended, signIn, signOut, acceptInvitation, changePassword],
  );
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionState {
  const state = useContext(SessionContext);
  if (!state) throw new Error("useSession outside SessionProvider");
  return state;
}

/** The signed-in session; only for pages inside the signed-in layout. */
export function useSignedIn(): ConsoleSession & { readOnly: boolean } {
  const { session, readOnly } = useSession();
  if (!session) throw new Error("useSignedIn without a session");
  return { ...session, readOnly };
}
