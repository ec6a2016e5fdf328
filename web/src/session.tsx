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
import { forgetStarted, markStarted, startedHere } from "./started-sessions.ts";

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
  /**
   * Why the first check could not tell whether anyone is signed in (the server unreachable, a 503 or
   * a 429): only a 401 means signed out. `session` stays `undefined` meanwhile.
   */
  checkError: unknown;
  /**
   * True when the first check found a session this console did not start in this browser (planted by
   * a page on another port of the host): it was ended, not used. False after a sign-in.
   */
  refused: boolean;
  /** Runs the session check again after `checkError`. */
  recheck(): void;
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

/** Ends the session of the CSRF token set (`remember`); one that already ended is ended all the same. */
async function endSession() {
  try {
    await call(api.DELETE("/v1/console/session"));
  } catch (error) {
    if (!(error instanceof ApiFailure && error.status === 401)) throw error;
  }
}

/** How many sessions the first check ends before giving up: one for each planted cookie. */
const REFUSED_AT_MOST = 3;

/**
 * The browser's session, or null when nobody is signed in. A session this console did not start
 * (started-sessions.ts) is ended, not used -- anyone holding its cookie may end it -- and the check
 * runs again, since the person's own session may be behind it.
 */
async function sessionStartedHere(): Promise<{ session: ConsoleSession | null; refused: boolean }> {
  let refused = false;
  for (let round = 0; round < REFUSED_AT_MOST; round++) {
    let session: ConsoleSession;
    try {
      session = (await call(api.GET("/v1/console/session"))).data;
    } catch (error) {
      // Only the API's 401 says nobody is signed in; anything else says nothing about the session.
      if (error instanceof ApiFailure && error.status === 401) return { session: null, refused };
      throw error;
    }
    if (startedHere(session.csrf_token)) return { session, refused };
    refused = true;
    remember(session);
    try {
      await endSession();
    } finally {
      remember(null);
    }
  }
  return { session: null, refused };
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const [ended, setEnded] = useState(false);
  const [checkError, setCheckError] = useState<unknown>();
  const [refused, setRefused] = useState(false);
  const [checkRound, setCheckRound] = useState(0);

  // biome-ignore lint/correctness/useExhaustiveDependencies: `checkRound` is the trigger of a recheck
  useEffect(() => {
    let current = true;
    sessionStartedHere().then(
      (found) => {
        if (!current) return;
        setCheckError(undefined);
        setRefused(found.refused);
        setSession(remember(found.session));
      },
      (error: unknown) => {
        if (current) setCheckError(error);
      },
    );
    return () => {
      current = false;
    };
  }, [checkRound]);
  const recheck = useCallback(() => {
    setCheckError(undefined);
    setCheckRound((round) => round + 1);
  }, []);

  // Any 401 while signed in means the session is gone: the pages lead to sign-in (RequireSession).
  const signedInSession = useRef<ConsoleSession | null | undefined>(undefined);
  signedInSession.current = session;
  useEffect(() => {
    onSessionEnded(() => {
      if (!signedInSession.current) return;
      setEnded(true);
      setSession(remember(null));
    });
    return () => onSessionEnded(undefined);
  }, []);

  const signIn = useCallback(async (email: string, password: string) => {
    const body = await call(api.POST("/v1/console/session", { body: { email, password } }));
    markStarted(body.data.csrf_token);
    setEnded(false);
    setRefused(false);
    setCheckError(undefined);
    setSession(remember(body.data));
  }, []);

  const signOut = useCallback(async () => {
    await endSession();
    if (signedInSession.current) forgetStarted(signedInSession.current.csrf_token);
    setSession(remember(null));
  }, []);

  const acceptInvitation = useCallback(async (token: string, password: string) => {
    const body = await call(api.POST("/v1/console/invitations/accept", { body: { token, password } }));
    markStarted(body.data.csrf_token);
    setEnded(false);
    setRefused(false);
    setSession(remember(body.data));
  }, []);

  const changePassword = useCallback(async (currentPassword: string, newPassword: string) => {
    await call(
      api.PUT("/v1/console/password", {
        body: { current_password: currentPassword, new_password: newPassword },
      }),
    );
    // The fresh session has a CSRF token of its own. It is this user's: with another user's session
    // cookie beside it, the API ends both and answers 401.
    const body = await call(api.GET("/v1/console/session"));
    if (signedInSession.current) forgetStarted(signedInSession.current.csrf_token);
    markStarted(body.data.csrf_token);
    setSession(remember(body.data));
  }, []);

  const value = useMemo(
    () => ({
      session,
      ended,
      checkError,
      refused,
      recheck,
      signIn,
      signOut,
      acceptInvitation,
      changePassword,
      readOnly: session?.user.read_only ?? true,
    }),
    [session, ended, checkError, refused, recheck, signIn, signOut, acceptInvitation, changePassword],
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
