import { randomUUID } from "node:crypto";
import { type Clock, laterBy, nowIso } from "../clock.ts";
import type { FieldError } from "../http/errors.ts";
import { readBool } from "../store/codec.ts";
import { isUniqueViolation, type Transact, type Trx } from "../store/transactions.ts";
import { hasControlCharacter } from "../text.ts";
import { generateToken, hashSecret } from "./keys.ts";
import {
  hashPassword,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
  UNKNOWN_USER_HASH,
  verifyPassword,
} from "./passwords.ts";
import type { IdentityRepository } from "./repository.ts";
import type { IdentityService, Issuer, SessionIdentity } from "./service.ts";
import { csrfTokenFor, INVITATION_LIFETIME_MS, SESSION_LIFETIME_MS } from "./sessions.ts";
import type { UserRow } from "./tables.ts";
import type { UserRepository } from "./user-repository.ts";

/** What the console knows of its session (`ConsoleSession` in the API). */
export interface ConsoleSessionView {
  user: { id: number; uuid: string; email: string; read_only: boolean };
  organization: { id: string; name: string };
  csrf_token: string;
}

/** A session just opened: the cookie's value (shown to no one else) and what the console shows. */
export interface OpenedSession {
  token: string;
  session: ConsoleSessionView;
}

export interface ConsoleUser {
  id: number;
  uuid: string;
  organization_id: string;
  email: string;
  read_only: boolean;
  /** `invited` until the user has chosen a password. */
  status: "active" | "invited";
  created_at: string;
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;
const EMAIL_MAX_LENGTH = 254;

/**
 * Emails are compared case-insensitively and by what they show: kept trimmed, lower-case and in
 * Unicode NFC, so a letter typed precomposed (`ä`) or decomposed (`a` and U+0308) is one address.
 */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase().normalize("NFC");

function passwordErrors(field: string, password: string): FieldError[] {
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH)
    return [{ field, code: "validation_min", message: `Must be at least ${PASSWORD_MIN_LENGTH} characters` }];
  if (length > PASSWORD_MAX_LENGTH)
    return [{ field, code: "validation_max", message: `Must be at most ${PASSWORD_MAX_LENGTH} characters` }];
  return [];
}

/** Whether an invitation can still be accepted at `now`. */
function invitationState(
  invitation: { accepted_at: string | null; expires_at: string } | undefined,
  now: string,
): "open" | "expired" | "not_found" {
  if (!invitation || invitation.accepted_at !== null) return "not_found";
  return invitation.expires_at <= now ? "expired" : "open";
}

/** The token's field error of an invitation that cannot be accepted. */
export function invitationError(state: "expired" | "not_found"): FieldError {
  return {
    field: "token",
    code: "validation_credentials",
    message:
      state === "expired" ? "This invitation has expired" : "This invitation is unknown or was already used",
  };
}

const toConsoleUser = (row: UserRow): ConsoleUser => ({
  id: row.id,
  uuid: row.uuid,
  organization_id: row.organization_id,
  email: row.email,
  read_only: readBool(row.read_only),
  status: row.password_hash === null ? "invited" : "active",
  created_at: row.created_at,
});

export const sessionView = (token: string, identity: SessionIdentity): ConsoleSessionView => ({
  user: {
    id: identity.auth.userId,
    uuid: identity.auth.userUuid,
    email: identity.email,
    read_only: identity.auth.readOnly,
  },
  organization: { id: identity.auth.organizationId, name: identity.organizationName },
  csrf_token: csrfTokenFor(token),
});

/** People of an organization signing in to the console: users, passwords, sessions, invitations. */
export class ConsoleService {
  constructor(
    private readonly users: UserRepository,
    private readonly organizations: IdentityRepository,
    private readonly identity: IdentityService,
    private readonly transact: Transact,
    private readonly clock: Clock,
    private readonly publicUrl: string,
  ) {}

  async signIn(
    email: string,
    password: string,
  ): Promise<({ outcome: "signed_in" } & OpenedSession) | { outcome: "invalid_credentials" }> {
    const user = await this.users.findByEmail(normalizeEmail(email));
    // An unknown email costs the same scrypt run as a wrong password.
    const matches = await verifyPassword(password, user?.password_hash ?? UNKNOWN_USER_HASH);
    if (!user || user.password_hash === null || !matches) return { outcome: "invalid_credentials" };
    const token = await this.transact((trx) => this.openSession(trx, user.id));
    return { outcome: "signed_in", ...(await this.opened(token)) };
  }

  /** The session of this cookie, as the console shows it. */
  async current(token: string): Promise<ConsoleSessionView | undefined> {
    const [live] = await this.identity.liveSessions([token]);
    return live && sessionView(token, live.identity);
  }

  /** Whether `password` is the user's own: the `current_password` error of a password change, or none. */
  async currentPasswordErrors(userId: number, password: string): Promise<FieldError[]> {
    const user = await this.users.findConsoleUser(userId);
    if (user?.password_hash && (await verifyPassword(password, user.password_hash))) return [];
    return [
      { field: "current_password", code: "validation_credentials", message: "The password is not correct" },
    ];
  }

  /** Ends every session of the user, the caller's too, and opens a new one for the caller. */
  async changePassword(
    userId: number,
    currentPassword: string,
    newPassword: string,
  ): Promise<({ outcome: "changed" } & OpenedSession) | { outcome: "invalid"; errors: FieldError[] }> {
    const errors = [
      ...(await this.currentPasswordErrors(userId, currentPassword)),
      ...passwordErrors("new_password", newPassword),
    ];
    if (errors.length > 0) return { outcome: "invalid", errors };
    const passwordHash = await hashPassword(newPassword);
    const token = await this.transact(async (trx) => {
      await this.users.setPassword(trx, userId, passwordHash);
      await this.users.deleteUserSessions(trx, userId);
      return this.openSession(trx, userId);
    });
    return { outcome: "changed", ...(await this.opened(token)) };
  }

  /** What is wrong with an invitation token, as field errors: none while it can be accepted. */
  async invitationErrors(invitationToken: string): Promise<FieldError[]> {
    const invitation = await this.users.findInvitation(this.users.db, hashSecret(invitationToken));
    const state = invitationState(invitation, nowIso(this.clock));
    return state === "open" ? [] : [invitationError(state)];
  }

  /** Sets the invited user's password and signs them in; an invitation works once, until it expires. */
  async acceptInvitation(
    invitationToken: string,
    password: string,
  ): Promise<
    | ({ outcome: "accepted" } & OpenedSession)
    | { outcome: "invalid"; errors: FieldError[] }
    | { outcome: "expired" }
    | { outcome: "not_found" }
  > {
    const errors = passwordErrors("password", password);
    if (errors.length > 0) {
      return { outcome: "invalid", errors: [...(await this.invitationErrors(invitationToken)), ...errors] };
    }
    const passwordHash = await hashPassword(password);
    const now = nowIso(this.clock);
    const result = await this.transact(async (trx) => {
      const invitation = await this.users.findInvitation(trx, hashSecret(invitationToken));
      const state = invitationState(invitation, now);
      if (!invitation || state !== "open")
        return { outcome: state === "expired" ? "expired" : "not_found" } as const;
      if (!(await this.users.acceptInvitation(trx, invitation.id, now)))
        return { outcome: "not_found" as const };
      await this.users.setPassword(trx, invitation.user_id, passwordHash);
      return { outcome: "accepted" as const, token: await this.openSession(trx, invitation.user_id) };
    });
    if (result.outcome !== "accepted") return result;
    return { outcome: "accepted", ...(await this.opened(result.token)) };
  }

  /**
   * A console user of the organization. With a password they can sign in at once; without one the
   * answer carries a one-time invitation link (shown this once) for them to choose it.
   */
  async createUser(input: {
    organizationId: string;
    email: string;
    readOnly: boolean;
    password?: string;
  }): Promise<
    | { outcome: "created"; user: ConsoleUser; invitation_url?: string; invitation_expires_at?: string }
    | { outcome: "organization_not_found" }
    | { outcome: "email_taken" }
    | { outcome: "invalid"; errors: FieldError[] }
  > {
    const email = normalizeEmail(input.email);
    const errors: FieldError[] = [];
    if (!EMAIL.test(email) || email.length > EMAIL_MAX_LENGTH || hasControlCharacter(email))
      errors.push({ field: "email", code: "validation_format", message: "Must be an email address" });
    if (input.password !== undefined) errors.push(...passwordErrors("password", input.password));
    if (errors.length > 0) return { outcome: "invalid", errors };
    if (!(await this.organizations.findOrganization(input.organizationId)))
      return { outcome: "organization_not_found" };
    const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
    const invitationToken = passwordHash === null ? generateToken() : undefined;
    const now = this.clock.now();
    const expiresAt = laterBy(now, INVITATION_LIFETIME_MS).toISOString();
    const created = this.transact(async (trx) => {
      if (await this.users.emailTaken(trx, email)) return { outcome: "email_taken" as const };
      const user = await this.organizations.insertUser(trx, {
        uuid: randomUUID(),
        organization_id: input.organizationId,
        name: email,
        email,
        password_hash: passwordHash,
        read_only: input.readOnly,
        created_at: now.toISOString(),
      });
      if (invitationToken === undefined) return { outcome: "created" as const, user: toConsoleUser(user) };
      await this.users.insertInvitation(trx, {
        user_id: user.id,
        token_hash: hashSecret(invitationToken),
        created_at: now.toISOString(),
        expires_at: expiresAt,
      });
      return {
        outcome: "created" as const,
        user: toConsoleUser(user),
        invitation_url: `${this.publicUrl}/console/invite#${invitationToken}`,
        invitation_expires_at: expiresAt,
      };
    });
    // Two creations of one email at once: the unique index refuses the second.
    return created.catch((error: unknown) => {
      if (isUniqueViolation(error)) return { outcome: "email_taken" as const };
      throw error;
    });
  }

  /**
   * Users whose email migration 0709 left out of NFC, since another user has that NFC form: the
   * NFC spelling every sign-in is read as finds the other user, so they cannot sign in.
   */
  async emailsShadowed(): Promise<{ id: number; email: string }[]> {
    return (await this.users.allEmails()).filter((user) => user.email !== normalizeEmail(user.email));
  }

  async listUsers(organizationId: string): Promise<ConsoleUser[] | undefined> {
    if (!(await this.organizations.findOrganization(organizationId))) return undefined;
    return (await this.users.listConsoleUsers(organizationId)).map(toConsoleUser);
  }

  /** Whether an issuer still acts: its key neither revoked nor expired, its person not removed. */
  async issuerLive(issuer: Issuer): Promise<boolean> {
    const id = Number(issuer.slice(1));
    return issuer.startsWith("k")
      ? this.organizations.isLiveKey(id, nowIso(this.clock))
      : (await this.users.findConsoleUser(id)) !== undefined;
  }

  /**
   * Removes a console user: their sessions end at once, and the cloud tokens they created (keys
   * acting as them) are deleted with them and refused on every node.
   */
  async removeUser(id: number): Promise<{ outcome: "removed" | "not_found" }> {
    const keyIds = await this.transact(async (trx) => {
      const keys = await this.users.liveKeyIds(trx, id);
      return (await this.users.deleteConsoleUser(trx, id)) ? keys : undefined;
    });
    if (!keyIds) return { outcome: "not_found" };
    if (keyIds.length > 0) await this.identity.keyChanged();
    return { outcome: "removed" };
  }

  /** Removes sessions that have ended (idle or expired) before `before`: the housekeeper's task. */
  pruneEndedSessions(before: Date): Promise<number> {
    return this.users.pruneSessions(before.toISOString());
  }

  private async openSession(trx: Trx, userId: number): Promise<string> {
    const token = generateToken();
    const now = this.clock.now();
    await this.users.insertSession(trx, {
      user_id: userId,
      token_hash: hashSecret(token),
      created_at: now.toISOString(),
      expires_at: laterBy(now, SESSION_LIFETIME_MS).toISOString(),
    });
    return token;
  }

  private async opened(token: string): Promise<OpenedSession> {
    const session = await this.current(token);
    // Just committed with the clock's now; only a clock moved by days in between could end it.
    if (!session) throw new Error("a session just opened is not live");
    return { token, session };
  }
}
